"""Streaming reads on a real local Spark session when the topic's partitions change
between two runs of a query (one micro-batch each, ``trigger(once=True)``, one checkpoint):
a deleted partition's unread messages are never skipped silently."""

from __future__ import annotations

from pathlib import Path

import pytest

from lurcher.sdk.sync import SyncClient
from tests.spark.conftest import client_with_stream, connection
from tests.support.server import LurcherServer

pytestmark = pytest.mark.slow

STREAM = "spark-topology"
WAIT_S = 180.0


@pytest.fixture(scope="module")
def admin(module_server: LurcherServer):
    with client_with_stream(module_server, STREAM) as client:
        yield client


def run_once(spark, server: LurcherServer, topic: str, tmp: Path, **options: str) -> None:
    """One micro-batch of ``topic`` into parquet under ``tmp`` (the same checkpoint every
    run). Raises StreamingQueryException when the query fails."""
    reader = (spark.readStream.format("lurcher").option("connection", connection(server))
              .option("stream", STREAM).option("topic", topic)
              .option("startingOffsets", "earliest"))
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (reader.load().select("partition", "offset", "payload").writeStream
             .format("parquet").option("path", str(tmp / "out"))
             .option("checkpointLocation", str(tmp / "checkpoint"))
             .trigger(once=True).start())
    try:
        assert query.awaitTermination(WAIT_S), "the micro-batch did not finish"
    finally:
        query.stop()


def stored(spark, tmp: Path) -> list[tuple[int, int]]:
    rows = spark.read.parquet(str(tmp / "out")).select("partition", "offset").collect()
    return sorted((r.partition, r.offset) for r in rows)


def _two_partitions(admin: SyncClient, topic: str) -> None:
    admin.create_topic(STREAM, topic, partitions_count=2)
    admin.send_messages(STREAM, topic, [b"p0-%d" % i for i in range(3)], 0)
    admin.send_messages(STREAM, topic, [b"p1-%d" % i for i in range(10)], 1)


def test_a_deleted_partition_with_unread_messages_fails_the_query(spark, module_server,
                                                                 admin, tmp_path):
    """Partition 1 read up to offset 9, then 5 more messages sent to it and the partition
    deleted: the next run finished without error and the 5 were lost silently (the
    checkpoint kept partition 1's position and nothing compared it with the topic)."""
    from pyspark.errors import StreamingQueryException

    _two_partitions(admin, "deleted")
    run_once(spark, module_server, "deleted", tmp_path)
    assert len(stored(spark, tmp_path)) == 13
    admin.send_messages(STREAM, "deleted", [b"p1-%d" % i for i in range(10, 15)], 1)
    admin.delete_partitions(STREAM, "deleted", 1)
    with pytest.raises(StreamingQueryException,
                       match=r"partitions \[1\] of the checkpoint are gone"):
        run_once(spark, module_server, "deleted", tmp_path)
    assert len(stored(spark, tmp_path)) == 13


def test_progress_commits_skip_a_deleted_partition(spark, module_server, admin, tmp_path):
    """With commitConsumer and failOnDataLoss=false, the run after partition 1 was deleted
    failed storing the previous micro-batch's progress there (PartitionNotFound from
    store_consumer_offset): display-only progress stopped the query."""
    _two_partitions(admin, "deleted-committed")
    options = {"commitConsumer": "job", "failOnDataLoss": "false"}
    run_once(spark, module_server, "deleted-committed", tmp_path, **options)
    admin.delete_partitions(STREAM, "deleted-committed", 1)
    admin.send_messages(STREAM, "deleted-committed", [b"p0-3", b"p0-4"], 0)
    run_once(spark, module_server, "deleted-committed", tmp_path, **options)
    assert stored(spark, tmp_path) == sorted([(0, i) for i in range(5)] +
                                             [(1, i) for i in range(10)])
    offset = admin.get_consumer_offset("job", STREAM, "deleted-committed", 0)
    assert offset is not None and offset.stored_offset == 2  # the first run's end, 3
