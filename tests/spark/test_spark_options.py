"""Option values on a real local Spark session: a value the wire could not carry fails the
read or write with the one LurcherSparkError naming the option, before any connection."""

from __future__ import annotations

import pytest

from tests.spark.conftest import client_with_stream, connection
from tests.spark.spark_session import collect

pytestmark = pytest.mark.slow

TOO_LONG = "n" * 256  # a name or credential travels with a u8 length

UNCARRIABLE = [("address", "127.0.0.1"), ("address", "127.0.0.1:70000"),
               ("stream", TOO_LONG), ("topic", TOO_LONG), ("username", TOO_LONG),
               ("password", TOO_LONG), ("token", TOO_LONG),
               ("commitConsumer", TOO_LONG)]


@pytest.fixture(scope="module")
def topic(module_server):
    """Stream "s" with topic "t": a value that reached the server was refused for it."""
    with client_with_stream(module_server, "s") as client:
        client.create_topic("s", "t", partitions_count=1)
        yield "t"


def _with(builder, server, option: str, value: str):
    builder = (builder.format("lurcher").option("connection", connection(server))
               .option("stream", "s").option("topic", "t"))
    return builder.option(option, value)


@pytest.mark.parametrize("option, value", UNCARRIABLE)
def test_a_value_the_wire_cannot_carry_names_its_option(spark, module_server, topic, option,
                                                        value):
    """The address without a port, or past 65535, and the names and credentials over 255
    bytes were a ValueError from deep in the SDK ("address must be host:port", "name
    longer than 255 bytes") that named no option; a commitConsumer was not checked at all."""
    expected = f"lurcher option '{option.lower() if option.startswith('commit') else option}'"
    reader = _with(spark.read, module_server, option, value)
    with pytest.raises(Exception, match=expected):
        collect(reader.load())
    df = spark.createDataFrame([(b"x",)], "payload binary")
    with pytest.raises(Exception, match=expected):
        _with(df.write, module_server, option, value).mode("append").save()
