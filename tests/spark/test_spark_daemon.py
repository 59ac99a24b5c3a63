"""``lurcher.spark.daemon``: the test session's Python workers fork from it, start with the
data source's modules loaded, and a read after a ``limit`` (which makes Spark replace its
worker) returns every row. Real local Spark, real lurcher server."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lurcher.sdk.sync import SyncClient
from tests.spark.conftest import connection
from tests.spark.spark_session import collect
from tests.support.server import REPO_ROOT, LurcherServer

pytestmark = pytest.mark.slow

PRELOADED = ("numpy", "pyarrow", "lurcher.spark.reader", "lurcher.spark.writer")


def test_the_daemon_imports_the_source_and_starts_no_thread():
    code = ("import sys, threading; import lurcher.spark.daemon;"
            f"print(all(m in sys.modules for m in {PRELOADED!r}), threading.active_count())")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.split() == ["True", "1"]


def test_workers_fork_from_the_lurcher_daemon(spark):
    def _parent_command(_: object) -> str:  # pickled by value: workers lack this module
        import os

        with open(f"/proc/{os.getppid()}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode()

    parents = spark.sparkContext.parallelize(range(4), 2).map(_parent_command).collect()
    assert all("-m lurcher.spark.daemon pyspark.worker" in p for p in parents), parents


def test_rows_after_a_limit_are_intact(spark, module_server: LurcherServer):
    with SyncClient.from_connection_string(connection(module_server)) as sdk:
        sdk.create_stream("daemon")
        sdk.create_topic("daemon", "t", partitions_count=2)
        for p in range(2):
            sdk.send_messages("daemon", "t", [b"p%d-%d" % (p, i) for i in range(300)], p)
    df = (spark.read.format("lurcher").option("connection", connection(module_server))
          .option("stream", "daemon").option("topic", "t").load())
    assert len(collect(df.limit(5))) == 5
    rows = collect(df.select("partition", "offset", "payload"))
    assert sorted((r.partition, r.offset, r.payload) for r in rows) == [
        (p, i, b"p%d-%d" % (p, i)) for p in range(2) for i in range(300)]
