"""Streaming reads: lurcher -> parquet in micro-batches of at most maxMessagesPerTrigger,
stopped mid-stream, more messages produced, restarted from the checkpoint; the parquet
output must hold every message exactly once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lurcher.sdk.sync import SyncClient
from tests.spark.conftest import connection
from tests.spark.lurcher_data import payload, produce
from tests.spark.spark_session import collect
from tests.support.server import LurcherServer

pytestmark = pytest.mark.slow

STREAM = "spark-stream"
TOPIC = "ticks"
PARTITIONS = 3
FIRST = 4_000
MORE = 2_000
PER_TRIGGER = 2_000
WAIT_S = 180.0


def start_query(spark, server: LurcherServer, out: Path, checkpoint: Path):
    return (spark.readStream.format("lurcher").option("connection", connection(server))
            .option("stream", STREAM).option("topic", TOPIC)
            .option("startingOffsets", "earliest")
            .option("maxMessagesPerTrigger", str(PER_TRIGGER)).load()
            .select("partition", "offset", "payload")
            .writeStream.format("parquet").option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="100 milliseconds").start())


def wait_for(predicate, what: str, query) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise AssertionError(f"query failed while waiting for {what}: {query.exception()}")
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}; last progress {query.lastProgress}")


def stored(spark, out: Path) -> int:
    if not (out / "_spark_metadata").exists():
        return 0
    return spark.read.parquet(str(out)).count()


def test_restart_from_checkpoint_delivers_exactly_once(spark, module_server, tmp_path):
    from pyspark.sql import functions as F

    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    with SyncClient.from_connection_string(connection(module_server)) as client:
        client.create_stream(STREAM)
        client.create_topic(STREAM, TOPIC, partitions_count=PARTITIONS)
        produce(client, STREAM, TOPIC, PARTITIONS, 0, FIRST, 1_000)

        query = start_query(spark, module_server, out, checkpoint)
        try:
            wait_for(lambda: sum(1 for p in query.recentProgress if p["numInputRows"]) >= 2,
                     "two micro-batches", query)
            assert all(p["numInputRows"] <= PER_TRIGGER for p in query.recentProgress)
        finally:
            query.stop()
        first = stored(spark, out)
        assert 0 < first < FIRST * PARTITIONS, "the query should have stopped mid-stream"

        produce(client, STREAM, TOPIC, PARTITIONS, FIRST, MORE, 1_000)

    total = (FIRST + MORE) * PARTITIONS
    query = start_query(spark, module_server, out, checkpoint)
    try:
        wait_for(lambda: stored(spark, out) >= total, f"{total} rows in parquet", query)
        time.sleep(1.0)  # a few more (empty) triggers must not add anything
    finally:
        query.stop()

    rows = spark.read.parquet(str(out))
    assert rows.count() == total
    assert rows.select("partition", "offset").distinct().count() == total
    per_partition = {r["partition"]: (r["lo"], r["hi"], r["n"]) for r in collect(rows.groupBy(
        "partition").agg(F.min("offset").alias("lo"), F.max("offset").alias("hi"),
                         F.count("*").alias("n")))}
    assert per_partition == {p: (0, FIRST + MORE - 1, FIRST + MORE) for p in range(PARTITIONS)}
    sample = collect(rows.where(F.col("offset").isin(0, FIRST - 1, FIRST, FIRST + MORE - 1)))
    assert len(sample) == 4 * PARTITIONS
    assert all(r.payload == payload(r.partition, r.offset) for r in sample)
