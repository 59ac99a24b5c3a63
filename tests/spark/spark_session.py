"""What every Spark session the tests start shares: the settings (used by the session
fixture in ``conftest.py`` and by the driver programs that run as their own processes,
``pipeline_driver.py`` and ``cluster_driver.py``, which import this file as a sibling
module) and ``collect``, the tests' ``collect()`` of a DataFrame or an RDD.

Invariants: the driver binds to loopback only, no UI, two shuffle partitions; the JVM waits
``AUTH_SOCKET_TIMEOUT`` (Spark's default is 15 s) for a Python process to connect to a
socket it opened for it, so a CI machine that stalls a process for a few seconds does not
fail a test on the Python-to-JVM plumbing, which none of them checks.
"""

from __future__ import annotations

import warnings

LOOPBACK = "127.0.0.1"
AUTH_SOCKET_TIMEOUT = "120s"
COLLECT_ATTEMPTS = 3

BASE_CONF = {
    "spark.driver.host": LOOPBACK,
    "spark.driver.bindAddress": LOOPBACK,
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.python.authenticate.socketTimeout": AUTH_SOCKET_TIMEOUT,
}


def collect(df) -> list:
    """``df.collect()``, run again (up to ``COLLECT_ATTEMPTS`` in all, each a warning) when
    the driver lost the local socket its JVM serves the rows on. Once the driver connects,
    Spark gives it a fixed 10 s, not configurable, to authenticate; a stalled machine misses
    that and the call fails (``lost_result_socket``). Any other error propagates
    at once, and the rows of the attempt that succeeds are what the test checks."""
    for attempt in range(1, COLLECT_ATTEMPTS + 1):
        try:
            return df.collect()
        except Exception as error:  # PySpark raises it from a ``finally`` as another type
            if attempt == COLLECT_ATTEMPTS or not lost_result_socket(error):
                raise
            warnings.warn(f"Spark collect lost its local result socket (attempt {attempt}),"
                          " running it again", RuntimeWarning, stacklevel=2)
    raise AssertionError("unreachable")


def lost_result_socket(error: BaseException) -> bool:
    """Whether ``error`` is the driver failing to open the local result socket: PySpark's
    ``CANNOT_OPEN_SOCKET`` (the JVM reset the connection), or an EOF or socket error while
    authenticating (the JVM closed it). PySpark 4.3 masks both behind an UnboundLocalError
    for ``sockfile`` from the ``finally`` of ``_load_from_socket``; the cause is its context."""
    from pyspark.errors import PySparkRuntimeError

    masked = isinstance(error, UnboundLocalError) and "'sockfile'" in str(error)
    cause = error.__context__ if masked else error
    if isinstance(cause, PySparkRuntimeError):
        return cause.getCondition() == "CANNOT_OPEN_SOCKET"
    return masked and isinstance(cause, (EOFError, OSError))
