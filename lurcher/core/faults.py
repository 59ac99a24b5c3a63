"""Fault injection for crash tests, off unless an environment variable names a point.

``TEST_LURCHER_CRASH_AT=<point>`` makes the process SIGKILL itself the first time the code
reaches ``crash_point("<point>")``: a kill at an exact step, which a timed external SIGKILL
cannot hit reliably. Points are named ``<step>:<detail>`` (e.g.
``meta-recorded:StreamDeleted``). Unset (production), a point costs one comparison.
"""

from __future__ import annotations

import os
import signal

CRASH_AT_ENV = "TEST_LURCHER_CRASH_AT"

_crash_at = os.environ.get(CRASH_AT_ENV) or None


def crash_point(name: str) -> None:
    """SIGKILL this process when ``name`` is the configured crash point."""
    if _crash_at is not None and name == _crash_at:
        os.kill(os.getpid(), signal.SIGKILL)
