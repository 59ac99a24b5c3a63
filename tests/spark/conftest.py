"""Fixtures for the Spark data source tests: one local Spark session for the whole package
(a SparkContext is per process and costs tens of seconds to start) and module-scoped
lurcher servers.

The session binds to loopback only (driver host/bind address, ``SPARK_LOCAL_IP``), runs
``local[2]`` with small memory, and its Python workers use this interpreter with the
repository on ``PYTHONPATH``, so executors import ``lurcher`` the same way the tests do.
They fork from ``lurcher.spark.daemon`` (the driver programs of the pipeline and cluster
tests keep Spark's own daemon, so both run).
Every test here needs pyspark (the ``spark`` extra, part of ``dev``) and Java.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

import pytest

from lurcher.sdk.sync import SyncClient
from tests.spark.spark_session import BASE_CONF, LOOPBACK
from tests.support.server import REPO_ROOT, LurcherServer
from tests.support.system import require_system

import pyspark  # noqa: F401  (the spark extra; part of .[dev])

SPARK_ENV = {
    "SPARK_LOCAL_IP": LOOPBACK,
    "PYSPARK_PYTHON": sys.executable,
    "PYSPARK_DRIVER_PYTHON": sys.executable,
    "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", ""))
                                  if p),
}
SESSION_CONF = {
    **BASE_CONF,
    "spark.driver.memory": "1g",
    "spark.executor.memory": "1g",
    "spark.sql.session.timeZone": "UTC",
    "spark.python.worker.reuse": "true",
    "spark.executorEnv.PYTHONPATH": SPARK_ENV["PYTHONPATH"],
    "spark.sql.streaming.stopTimeout": "30s",
    "spark.python.daemon.module": "lurcher.spark.daemon",
}


def spark_env() -> dict[str, str]:
    """The process environment a Spark driver or daemon of these tests runs with."""
    return {**os.environ, **SPARK_ENV}


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A local[2] SparkSession with the ``lurcher`` format registered (pushdown on)."""
    require_system("java")
    from pyspark.sql import SparkSession

    import lurcher.spark

    saved = {k: os.environ.get(k) for k in SPARK_ENV}
    os.environ.update(SPARK_ENV)
    builder = SparkSession.builder.master("local[2]").appName("lurcher-spark-tests")
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    lurcher.spark.register(session)
    try:
        yield session
    finally:
        session.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LurcherServer]:
    """One lurcher server (TCP, iggy/iggy) for a whole test module."""
    srv = LurcherServer().start(tmp_path_factory.mktemp("lurcher-spark"))
    with srv:
        yield srv


def connection(server: LurcherServer) -> str:
    return f"iggy://iggy:iggy@{server.tcp_address}"


@contextlib.contextmanager
def client_with_stream(server: LurcherServer, stream: str) -> Iterator[SyncClient]:
    """An SDK client of ``server`` that has just created ``stream`` (a test module's own)."""
    with SyncClient.from_connection_string(connection(server)) as client:
        client.create_stream(stream)
        yield client


@pytest.fixture()
def dedup_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LurcherServer]:
    """A server with message deduplication on (``pipeline.DEDUP_ENV``), for the sink."""
    from tests.spark.pipeline import DEDUP_ENV

    srv = LurcherServer().start(tmp_path_factory.mktemp("lurcher-dedup"), extra_env=DEDUP_ENV)
    with srv:
        yield srv
