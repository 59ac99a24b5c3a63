"""A message's origin timestamp is whatever u64 its client sent; Spark's TimestampType
covers 0001-01-01 to 9999-12-31 only. A real local Spark session reads messages whose
origin timestamps lie inside, at the edge of and past that range: each in-range value comes
back exact, each one past it as NULL (never a clamped, wrong instant), and ``collect()``
of the whole DataFrame succeeds."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from lurcher.core.wire.batch import MessageBatch
from tests.spark.conftest import client_with_stream, connection
from tests.spark.spark_session import collect

pytestmark = pytest.mark.slow

STREAM = "spark-origin"
TOPIC = "t"
LAST_SPARK_MICROS = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999Z
ORIGINS = [0, 1_700_000_000_123_456, LAST_SPARK_MICROS, LAST_SPARK_MICROS + 1,
           (1 << 63) - 1, 1 << 63, (1 << 64) - 1]


def expected(micros: int) -> datetime | None:
    if micros > LAST_SPARK_MICROS:
        return None
    seconds, rest = divmod(micros, 1_000_000)
    return datetime.fromtimestamp(seconds, timezone.utc).replace(microsecond=rest,
                                                                tzinfo=None)


def test_origin_timestamps_past_sparks_range_read_as_null(spark, module_server):
    with client_with_stream(module_server, STREAM) as client:
        client.create_topic(STREAM, TOPIC, partitions_count=1)
        for origin in ORIGINS:  # one batch per value: a batch carries one origin timestamp
            batch = MessageBatch.build([str(origin).encode()], origin_timestamp_us=origin)
            client.send_messages(STREAM, TOPIC, batch, 0)
    df = (spark.read.format("lurcher").option("connection", connection(module_server))
          .option("stream", STREAM).option("topic", TOPIC).load())
    rows = collect(df.orderBy("offset").select("payload", "origin_timestamp", "timestamp"))
    assert [int(bytes(r.payload)) for r in rows] == ORIGINS
    for r, origin in zip(rows, ORIGINS):
        assert r.origin_timestamp == expected(origin), origin
        assert r.timestamp is not None
    nulls = df.where("origin_timestamp IS NULL").count()
    assert nulls == sum(o > LAST_SPARK_MICROS for o in ORIGINS)
