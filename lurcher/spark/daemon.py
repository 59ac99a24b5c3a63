"""Spark's Python worker daemon, with the data source's modules imported before it forks.

Owns: nothing but the imports. Spark forks each Python worker from one daemon process
(``pyspark.daemon``) and replaces a worker whenever a task stops reading its output early
(``limit``, ``show``, ``take``, ``head``). Every new worker then imports numpy, pyarrow and
lurcher afresh before its first row: about 0.4 s a replaced worker on a 2-core machine.
Named as Spark's daemon module (``spark.python.daemon.module=lurcher.spark.daemon``), this
module imports them once, in the daemon, and the workers it forks start with them loaded.
Everything else is ``pyspark.daemon``'s: the same arguments, the same protocol.

Invariants: the daemon only imports modules (no connection, no thread of lurcher's, no
event loop) before it forks, so a worker inherits nothing but loaded code.
"""

from __future__ import annotations

import numpy  # noqa: F401
import pyarrow  # noqa: F401
from pyspark.daemon import manager

import lurcher.spark.reader  # noqa: F401
import lurcher.spark.writer  # noqa: F401

if __name__ == "__main__":
    manager()
