"""Writes: DataFrames written to lurcher (batch and writeStream) and read back by the
official apache-iggy 0.8.0 client and the SDK; write failures name the Iggy error."""

from __future__ import annotations

import asyncio
import time

import pytest
from apache_iggy import PollingStrategy

from lurcher.sdk import ReceivedMessage
from tests.spark.conftest import client_with_stream, connection
from tests.support.official import connect_client
from tests.support.server import LurcherServer

pytestmark = pytest.mark.slow

STREAM = "spark-write"
PARTITIONS = 3
ROWS = 3_000


@pytest.fixture(scope="module")
def client(module_server: LurcherServer):
    with client_with_stream(module_server, STREAM) as sdk:
        yield sdk


def writer(df, server: LurcherServer, topic: str, stream: str = STREAM):
    return (df.write.format("lurcher").mode("append").option("connection", connection(server))
            .option("stream", stream).option("topic", topic).option("sendMessages", "400"))


def official_poll(server: LurcherServer, topic: str) -> dict[int, list]:
    """Every message of every partition, as the official client returns them."""
    async def poll() -> dict[int, list]:
        official = await connect_client(server)
        found = {}
        for p in range(PARTITIONS):
            found[p] = await official.poll_messages(STREAM, topic, p, PollingStrategy.First(),
                                                    ROWS * 2, False)
        return found
    return asyncio.run(poll())


def test_dataframe_written_and_read_by_official_client(spark, module_server, client):
    client.create_topic(STREAM, "rows", partitions_count=PARTITIONS)
    data = [(f"w-{i}".encode(), i % PARTITIONS, {"i": str(i).encode(), "kind": b"\x01"}, i + 1)
            for i in range(ROWS)]
    df = spark.createDataFrame(
        data, "payload binary, partition int, headers map<string,binary>, id long")
    writer(df.repartition(2), module_server, "rows").save()

    found = official_poll(module_server, "rows")
    for p, messages in found.items():
        expected = {(f"w-{i}".encode(), i + 1) for i in range(p, ROWS, PARTITIONS)}
        assert {(m.payload(), m.id()) for m in messages} == expected
        assert [m.offset() for m in messages] == list(range(len(expected)))
    polled = client.poll_messages(STREAM, "rows", 1, "first", 10)
    for m in polled.messages():
        i = int(m.payload.decode().removeprefix("w-"))
        assert ReceivedMessage.of(1, m).header_values() == {"i": str(i).encode(),
                                                            "kind": b"\x01"}


def test_keys_pick_one_partition_each_and_keep_order(spark, module_server, client):
    client.create_topic(STREAM, "keyed", partitions_count=PARTITIONS)
    data = [(f"k{i % 7}", f"{i % 7}:{i}") for i in range(700)]
    df = spark.createDataFrame(data, "key string, payload string").coalesce(1)
    writer(df, module_server, "keyed").save()
    found = official_poll(module_server, "keyed")
    where: dict[str, set[int]] = {}
    for p, messages in found.items():
        per_key: dict[str, list[int]] = {}
        for m in messages:
            key, seq = m.payload().decode().split(":")
            where.setdefault(key, set()).add(p)
            per_key.setdefault(key, []).append(int(seq))
        assert all(seqs == sorted(seqs) for seqs in per_key.values())
    assert sorted(where) == [str(k) for k in range(7)]
    assert all(len(parts) == 1 for parts in where.values())
    assert sum(len(m) for m in found.values()) == 700


def test_write_stream_copies_a_topic(spark, module_server, client, tmp_path):
    client.create_topic(STREAM, "source", partitions_count=PARTITIONS)
    client.create_topic(STREAM, "copy", partitions_count=PARTITIONS)
    for p in range(PARTITIONS):
        client.send_messages(STREAM, "source", [f"s{p}-{i}".encode() for i in range(500)], p)
    query = (spark.readStream.format("lurcher").option("connection", connection(module_server))
             .option("stream", STREAM).option("topic", "source")
             .option("startingOffsets", "earliest").load()
             .select("payload", "partition", "headers")
             .writeStream.format("lurcher").option("connection", connection(module_server))
             .option("stream", STREAM).option("topic", "copy")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(processingTime="100 milliseconds").start())
    try:
        deadline = time.monotonic() + 120
        while sum(p.messages_count for p in client.get_topic(STREAM, "copy").partitions) < 1500:
            assert query.exception() is None, query.exception()
            assert time.monotonic() < deadline, query.lastProgress
            time.sleep(0.5)
    finally:
        query.stop()
    found = official_poll(module_server, "copy")
    for p in range(PARTITIONS):
        assert [m.payload() for m in found[p]] == [f"s{p}-{i}".encode() for i in range(500)]


def test_write_failures_name_the_iggy_error(spark, module_server, client):
    client.create_topic(STREAM, "strict", partitions_count=PARTITIONS)
    df = spark.createDataFrame([(b"x", 0)], "payload binary, partition int")
    with pytest.raises(Exception, match=r"StreamNameNotFound \(1010\)"):
        writer(df, module_server, "strict", stream="no-such-stream").save()
    with pytest.raises(Exception, match=r"TopicNameNotFound \(2011\)"):
        writer(df, module_server, "no-such-topic").save()
    wrong_partition = spark.createDataFrame([(b"x", 7)], "payload binary, partition int")
    with pytest.raises(Exception, match=r"PartitionNotFound \(3007\)"):
        writer(wrong_partition, module_server, "strict").save()
    with pytest.raises(Exception, match="needs a 'payload' column"):
        writer(spark.createDataFrame([(b"x",)], "value binary"), module_server, "strict").save()
    with pytest.raises(Exception, match="cannot overwrite"):
        writer(df, module_server, "strict").mode("overwrite").save()


def test_a_payload_over_iggys_limit_fails_before_its_batch_is_sent(spark, module_server,
                                                                  client):
    """Three small rows and one of 64 MiB + 1 bytes in one task: the small ones were stored,
    then the server closed the connection on the large one (ConnectionClosed, which names
    no limit). Iggy's message builder refuses a payload over 64,000,000 bytes
    (TooBigMessagePayload); now so does the writer, before the batch is sent."""
    from pyspark.sql import functions as F

    client.create_topic(STREAM, "too-big", partitions_count=1)
    big = (64 << 20) + 1  # past the server's request limit too (limits.max_send_payload_bytes)
    df = spark.range(0, 4, 1, numPartitions=1).select(
        F.when(F.col("id") == 3, F.repeat(F.lit("q"), big)).otherwise(F.lit("small"))
        .alias("payload"))
    with pytest.raises(Exception, match=r"TooBigMessagePayload \(4022\)"):
        writer(df, module_server, "too-big").save()
    assert [p.messages_count for p in client.get_topic(STREAM, "too-big").partitions] == [0]


@pytest.mark.parametrize("rows, schema, error", [
    ([(b"a", "k"), (b"b", "")], "payload binary, key string", r"InvalidKeyValueLength \(4028\)"),
    ([(b"a", 0), (b"b", 7)], "payload binary, partition int", r"PartitionNotFound \(3007\)"),
])
def test_a_bad_target_fails_its_batch_before_any_row_is_sent(spark, module_server, client,
                                                             rows, schema, error):
    """One task, one good row and one whose key is empty or whose partition the topic
    lacks: the good row was stored, then the task failed (a retried task stores it again)."""
    topic = f"bad-target-{schema.split(', ')[1].split()[0]}"
    client.create_topic(STREAM, topic, partitions_count=2)
    df = spark.createDataFrame(rows, schema).coalesce(1)
    with pytest.raises(Exception, match=error):
        writer(df, module_server, topic).save()
    assert [p.messages_count for p in client.get_topic(STREAM, topic).partitions] == [0, 0]


def test_header_values_without_a_header_kind_are_refused_before_any_task(spark, module_server,
                                                                        client):
    """A headers map of timestamps (no Iggy header kind) was found only when a task met a
    row with one: the rows before it, in earlier Arrow batches, were stored, then the task
    failed with InvalidHeaderValue (4019)."""
    import datetime as dt

    client.create_topic(STREAM, "timestamp-headers", partitions_count=1)
    moment = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    df = spark.createDataFrame([(b"plain", {}), (b"stamped", {"at": moment})],
                               "payload binary, headers map<string, timestamp>").coalesce(1)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "1")
    try:
        with pytest.raises(Exception, match=r"'headers' values must be .*not timestamp"):
            writer(df, module_server, "timestamp-headers").save()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert [p.messages_count for p in client.get_topic(STREAM, "timestamp-headers").partitions
            ] == [0]
