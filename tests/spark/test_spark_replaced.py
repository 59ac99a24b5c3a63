"""A batch read on a real local Spark session whose topic is purged and refilled between
planning and reading: no row of the new messages reaches Spark as one of the planned
ones, also when the query stops before a split's last message (``limit``)."""

from __future__ import annotations

import pytest

from lurcher.sdk.sync import SyncClient
from tests.spark.conftest import client_with_stream, connection
from tests.spark.spark_session import collect
from tests.support.server import LurcherServer

pytestmark = pytest.mark.slow

STREAM = "spark-replaced"


@pytest.fixture(scope="module")
def admin(module_server: LurcherServer):
    with client_with_stream(module_server, STREAM) as client:
        yield client


def _refill(admin: SyncClient, topic: str, count: int) -> None:
    admin.purge_topic(STREAM, topic)
    admin.send_messages(STREAM, topic, [b"new %d" % i for i in range(count)], 0)


def test_a_limit_on_a_purged_and_refilled_topic_fails(spark, module_server, admin):
    admin.create_topic(STREAM, "limited", partitions_count=1)
    admin.send_messages(STREAM, "limited", [b"old %d" % i for i in range(100)], 0)
    df = _limited(spark, module_server)
    assert _payloads(df) == [b"old 0", b"old 1", b"old 2"]
    _refill(admin, "limited", 120)
    with pytest.raises(Exception, match="not the one there when the read was planned"):
        _payloads(df)
    assert _payloads(_limited(spark, module_server)) == [b"new 0", b"new 1", b"new 2"]


def _limited(spark, server: LurcherServer):
    """The first three messages of topic "limited", planned now, read in polls of 10."""
    return (spark.read.format("lurcher").option("connection", connection(server))
            .option("stream", STREAM).option("topic", "limited").option("pollMessages", "10")
            .load().select("offset", "payload").limit(3))


def _payloads(df) -> list[bytes]:
    return [bytes(row.payload) for row in collect(df)]
