"""Batch reads with a real local[2] Spark session from a real lurcher server:
200,000 messages over 4 partitions; counts, per-partition order, splits, offset/timestamp
filters, offset and timestamp options, headers, errors."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import pytest

from lurcher.sdk.sync import SyncClient
from tests.spark.conftest import connection
from tests.spark.lurcher_data import expected_headers, now_us, payload, produce, summaries
from tests.spark.spark_session import collect
from tests.support.server import LurcherServer

pytestmark = pytest.mark.slow

STREAM = "spark-batch"
TOPIC = "events"
PARTITIONS = 4
PER_PARTITION = 50_000
HALF = PER_PARTITION // 2
BATCH = 5_000


@dataclass
class Loaded:
    server: LurcherServer
    middle_us: int  # every message of the first half is older, of the second half not


@pytest.fixture(scope="module")
def loaded(module_server: LurcherServer) -> Loaded:
    with SyncClient.from_connection_string(connection(module_server)) as client:
        client.create_stream(STREAM)
        client.create_topic(STREAM, TOPIC, partitions_count=PARTITIONS)
        produce(client, STREAM, TOPIC, PARTITIONS, 0, HALF, BATCH)
        time.sleep(0.01)
        middle = now_us()
        time.sleep(0.01)
        produce(client, STREAM, TOPIC, PARTITIONS, HALF, HALF, BATCH)
    return Loaded(module_server, middle)


def reader(spark, loaded: Loaded, **options: str):
    r = (spark.read.format("lurcher").option("connection", connection(loaded.server))
         .option("stream", STREAM).option("topic", TOPIC))
    for key, value in options.items():
        r = r.option(key, value)
    return r.load()


def filtered_by_spark(df) -> bool:
    """Whether Spark's physical plan still has a Filter operator above the scan."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    return re.search(r"\bFilter\b", plan) is not None


def test_counts_order_and_payloads(spark, loaded):
    df = reader(spark, loaded)
    assert df.rdd.getNumPartitions() == PARTITIONS
    found = sorted(collect(df.select("partition", "offset", "payload").rdd
                           .mapPartitions(summaries)))
    assert found == [(p, PER_PARTITION, 0, PER_PARTITION - 1, True, True)
                         for p in range(PARTITIONS)]


def test_large_partitions_split_into_ranges(spark, loaded):
    df = reader(spark, loaded, maxMessagesPerPartition="20000", pollMessages="3000")
    assert df.rdd.getNumPartitions() == PARTITIONS * 3
    counts = {r["partition"]: (r["n"], r["distinct_offsets"]) for r in collect(
        df.groupBy("partition").agg({"*": "count", "offset": "approx_count_distinct"})
        .withColumnRenamed("count(1)", "n")
        .withColumnRenamed("approx_count_distinct(offset)", "distinct_offsets"))}
    assert {p: n for p, (n, _) in counts.items()} == {p: PER_PARTITION for p in range(4)}
    found = collect(df.select("partition", "offset", "payload").rdd.mapPartitions(summaries))
    assert sorted((s[0], s[2], s[3]) for s in found) == [
        (p, s, min(s + 20_000, PER_PARTITION) - 1)
        for p in range(PARTITIONS) for s in range(0, PER_PARTITION, 20_000)]
    assert all(s[4] and s[5] for s in found)


def test_offset_filters_are_applied_by_spark(spark, loaded):
    """Filters are never pushed into the read on this PySpark (see lurcher.spark.reader):
    Spark applies them over complete reads; the options read a range narrowly instead."""
    from pyspark.sql import functions as F

    condition = (F.col("offset") >= 1000) & (F.col("offset") < 1500) & (F.col("partition") == 2)
    query = reader(spark, loaded).where(condition)
    assert filtered_by_spark(query)
    rows = collect(query.select("partition", "offset", "payload"))
    assert sorted(r.offset for r in rows) == list(range(1000, 1500))
    assert all(r.partition == 2 and r.payload == payload(2, r.offset) for r in rows)
    narrow = reader(spark, loaded, partitions="2", startingOffsets='{"2": 1000}',
                    endingOffsets='{"2": 1500}')
    assert narrow.rdd.getNumPartitions() == 1
    assert sorted(r.offset for r in collect(narrow.select("offset"))) == list(range(1000, 1500))
    mixed = reader(spark, loaded).where((F.col("offset") < 10) & (F.col("offset") % 2 == 0))
    assert mixed.count() == 5 * PARTITIONS


def test_timestamp_filters_are_applied_by_spark(spark, loaded):
    from pyspark.sql import functions as F

    middle = F.timestamp_micros(F.lit(loaded.middle_us))
    newer = reader(spark, loaded).where(F.col("timestamp") >= middle)
    rows = newer.groupBy("partition").agg(F.min("offset").alias("lo"), F.count("*").alias("n"))
    assert sorted(tuple(r) for r in collect(rows)) == [(p, HALF, HALF) for p in range(4)]
    older = reader(spark, loaded).where(F.col("timestamp") < middle)
    assert collect(older.agg(F.max("offset")))[0][0] == HALF - 1
    assert older.count() == HALF * PARTITIONS


def test_offset_and_timestamp_options(spark, loaded):
    df = reader(spark, loaded, partitions="0,1,3",
                startingOffsets='{"0": 10, "1": "latest", "3": -2}',
                endingOffsets='{"0": 20, "3": 7}')
    got = sorted((r.partition, r.offset) for r in collect(df.select("partition", "offset")))
    assert got == [(0, o) for o in range(10, 20)] + [(3, o) for o in range(7)]
    since = reader(spark, loaded, startingTimestamp=str(loaded.middle_us),
                   endingOffsets=f'{{"1": {HALF + 3}}}')
    counts = dict(collect(since.groupBy("partition").count()))
    assert counts == {0: HALF, 1: 3, 2: HALF, 3: HALF}
    until = reader(spark, loaded, endingTimestamp=str(loaded.middle_us), partitions="2")
    assert until.count() == HALF


def test_headers_ids_and_timestamps_intact(spark, loaded):
    from pyspark.sql import functions as F

    picked = [0, BATCH - 1, BATCH, PER_PARTITION - 1]
    rows = collect(reader(spark, loaded).where(F.col("offset").isin(picked))
                   .select("partition", "offset", "headers", "id", "timestamp",
                           "origin_timestamp", "stream", "topic"))
    assert len(rows) == len(picked) * PARTITIONS
    for r in rows:
        assert r.headers == expected_headers(r.partition, r.offset, BATCH)
        assert len(r.id) == 16 and r.id != bytes(16)
        assert r.origin_timestamp <= r.timestamp
        assert (r.stream, r.topic) == (STREAM, TOPIC)
    assert len({r.id for r in rows}) == len(rows)


def test_unknown_stream_and_partition_name_the_iggy_error(spark, loaded):
    with pytest.raises(Exception, match=r"StreamNameNotFound \(1010\)"):
        (spark.read.format("lurcher").option("connection", connection(loaded.server))
         .option("stream", "no-such-stream").option("topic", TOPIC).load().count())
    with pytest.raises(Exception, match=r"PartitionNotFound \(3007\)"):
        reader(spark, loaded, partitions="9").count()
