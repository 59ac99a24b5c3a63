"""The data source's reading and writing logic against a real lurcher server, without a
Spark session: ``plan_batch``/``read_split`` on the read side, ``send_record_batch`` on
the write side, with Arrow batches built here as Spark would hand them over."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pyarrow as pa
import pytest

from lurcher.core.wire.headers import HeaderKind, HeaderValue, encode_headers
from lurcher.sdk.sync import SyncClient
from lurcher.spark.filters import RowBounds
from lurcher.spark.options import LurcherSparkError, SourceOptions, source_options
from lurcher.spark.plan import plan_batch, read_split
from lurcher.spark.reader import LurcherStreamReader, stream_reader
from lurcher.spark.writer import send_record_batch
from tests.spark.conftest import connection
from tests.support.server import LurcherServer

STREAM = "spark-server"


@pytest.fixture(scope="module")
def client(module_server: LurcherServer) -> Iterator[SyncClient]:
    with SyncClient.from_connection_string(connection(module_server)) as sdk:
        sdk.create_stream(STREAM)
        yield sdk


def options(server: LurcherServer, topic: str, **extra: str) -> SourceOptions:
    return source_options({"connection": connection(server), "stream": STREAM,
                           "topic": topic, **extra})


def read_rows(opts: SourceOptions) -> list[dict]:
    """Every row a batch read with ``opts`` returns, split after split."""
    return [row for split in plan_batch(opts, RowBounds())
            for batch in read_split(opts, RowBounds(), split) for row in batch.to_pylist()]


def test_partition_past_u32_is_refused_not_sent_by_key(module_server, client):
    """A ``partition`` of 2**32 was taken for the first key's group code (sent where that
    key hashes) or, without a key column, an IndexError."""
    client.create_topic(STREAM, "wide-partition", partitions_count=2)
    opts = options(module_server, "wide-partition")
    keyed = pa.record_batch({"payload": [b"keyed", b"wide"], "key": [b"k", b"k"],
                             "partition": pa.array([None, 1 << 32], pa.int64())})
    alone = pa.record_batch({"payload": [b"wide"],
                             "partition": pa.array([1 << 32], pa.int64())})
    for batch in (keyed, alone):
        with pytest.raises(LurcherSparkError, match="'partition'"):
            send_record_batch(client, opts, batch)
    assert read_rows(opts) == []


@pytest.mark.parametrize("column", [pa.array([-1], pa.int64()),
                                    pa.array([b"\x01" * 17], pa.binary())])
def test_id_outside_u128_is_a_clear_error(module_server, client, column):
    """A negative ``id`` or one of more than 16 bytes was an OverflowError from the batch
    builder (a traceback, not the data source's error naming the column)."""
    topic = f"bad-id-{column.type}"
    client.create_topic(STREAM, topic, partitions_count=1)
    opts = options(module_server, topic)
    with pytest.raises(LurcherSparkError, match="'id'"):
        send_record_batch(client, opts, pa.record_batch({"payload": [b"x"], "id": column}))
    assert read_rows(opts) == []


def test_header_keys_of_every_kind_read_as_distinct_text(module_server, client):
    """A string key that is not UTF-8 failed the read with a UnicodeDecodeError; a numeric
    key 5 and a string key "5" both read as "5" (two equal map keys), a raw key b"k" as
    "b'k'" (a Python repr)."""
    client.create_topic(STREAM, "header-keys", partitions_count=1)
    headers = {HeaderValue(HeaderKind.STRING, b"\xff\xfe"): HeaderValue.of(HeaderKind.RAW, b"a"),
               "5": HeaderValue.of(HeaderKind.STRING, "b"),
               HeaderValue.of(HeaderKind.INT32, 5): HeaderValue.of(HeaderKind.INT32, -1),
               HeaderValue.of(HeaderKind.RAW, b"k\x00"): HeaderValue.of(HeaderKind.BOOL, True),
               HeaderValue.of(HeaderKind.BOOL, False): HeaderValue.of(HeaderKind.FLOAT64, 0.5),
               HeaderValue.of(HeaderKind.UINT128, 1 << 100): HeaderValue.of(HeaderKind.RAW, b"\xff")}
    client.send_messages(STREAM, "header-keys", [b"\xff\xfe payload"], 0,
                         headers=[encode_headers(headers)])
    [row] = read_rows(options(module_server, "header-keys"))
    assert dict(row["headers"]) == {
        "string://4=": b"a", "5": b"b", "int32:5": b"\xff\xff\xff\xff", "raw:awA=": b"\x01",
        "bool:false": struct.pack("<d", 0.5),
        f"uint128:{1 << 100}": b"\xff"}
    assert row["payload"] == b"\xff\xfe payload"


def test_rows_past_the_servers_request_limit_are_sent_in_smaller_batches(module_server,
                                                                         client):
    """``sendMessages`` (default 1,000) rows of 200 kB are 200 MB, past the server's
    64 MiB SendMessages limit: the server closed the connection and nothing was written."""
    client.create_topic(STREAM, "large-rows", partitions_count=1)
    opts = options(module_server, "large-rows")
    payloads = [bytes([i % 251]) * 200_000 for i in range(350)]  # 70 MB
    batch = pa.record_batch({"payload": payloads,
                             "partition": pa.array([0] * len(payloads), pa.int32())})
    assert send_record_batch(client, opts, batch) == len(payloads)
    rows = read_rows(opts)
    assert [r["offset"] for r in rows] == list(range(len(payloads)))
    assert [r["payload"] for r in rows] == payloads


def test_commit_consumer_group_with_a_numeric_name(module_server, client):
    """``commitConsumerGroup="5"`` created a group named "5" and then joined group id 5
    (ConsumerGroupIdNotFound), and every later commit failed creating it again
    (ConsumerGroupNameAlreadyExists): the streaming query stopped at its first batch."""
    client.create_topic(STREAM, "numeric-group", partitions_count=1)
    client.send_messages(STREAM, "numeric-group", [b"m"] * 5, 0)
    reader = LurcherStreamReader(options(module_server, "numeric-group",
                                         commitConsumerGroup="5"))
    reader.commit({"0": 3})
    reader.commit({"0": 5})
    [group] = client.get_consumer_groups(STREAM, "numeric-group")
    assert group.name == "5"
    client.join_consumer_group(STREAM, "numeric-group", group.id)  # joined by id; any client reads
    stored = client.get_consumer_offset(group.id, STREAM, "numeric-group", 0, group=True)
    assert stored.stored_offset == 4


def _refill_after_purge(client: SyncClient, topic: str, count: int) -> None:
    client.purge_topic(STREAM, topic)
    client.send_messages(STREAM, topic, [b"new %d" % i for i in range(count)], 0)


def test_a_batch_planned_before_a_purge_and_refill_fails(module_server, client):
    """A read planned at offsets 0..99, then the topic purged and refilled with 100 other
    messages before the split is read: the split returned the new messages as if they
    were the planned ones."""
    client.create_topic(STREAM, "purged-batch", partitions_count=1)
    client.send_messages(STREAM, "purged-batch", [b"old %d" % i for i in range(100)], 0)
    opts = options(module_server, "purged-batch")
    [split] = plan_batch(opts, RowBounds())
    _refill_after_purge(client, "purged-batch", 120)
    with pytest.raises(LurcherSparkError, match="not the one there when the read was planned"):
        list(read_split(opts, RowBounds(), split))
    lenient = options(module_server, "purged-batch", failOnDataLoss="false")
    rows = [r for b in read_split(lenient, RowBounds(), split) for r in b.to_pylist()]
    assert [r["payload"] for r in rows] == [b"new %d" % i for i in range(100)]
    assert len(read_rows(opts)) == 120  # planned again: the new messages


def test_the_first_rows_of_a_purged_and_refilled_split_are_refused(module_server, client):
    """As above, read in polls of 10 and stopped after the first (as a ``limit`` stops a
    task): the check came with the split's last message only, so the first batch held
    ten of the new messages as if they were the planned ones."""
    client.create_topic(STREAM, "purged-limit", partitions_count=1)
    client.send_messages(STREAM, "purged-limit", [b"old %d" % i for i in range(100)], 0)
    opts = options(module_server, "purged-limit", pollMessages="10")
    [split] = plan_batch(opts, RowBounds())
    assert next(read_split(opts, RowBounds(), split)).num_rows == 10  # as planned
    _refill_after_purge(client, "purged-limit", 50)  # the planned last offset, 99, is gone
    with pytest.raises(LurcherSparkError, match="not the one there when the read was planned"):
        next(read_split(opts, RowBounds(), split))
    _refill_after_purge(client, "purged-limit", 120)  # 99 is there again, another message
    with pytest.raises(LurcherSparkError, match="not the one there when the read was planned"):
        next(read_split(opts, RowBounds(), split))


def test_a_stream_purged_and_refilled_past_its_offset_fails(module_server, client):
    """A micro-batch read offsets 0..99; the topic was purged and refilled with 150 other
    messages before the next one: the next micro-batch read 100..149 and the new
    messages 0..99 were skipped silently."""
    client.create_topic(STREAM, "purged-stream", partitions_count=1)
    client.send_messages(STREAM, "purged-stream", [b"old %d" % i for i in range(100)], 0)
    reader = LurcherStreamReader(options(module_server, "purged-stream",
                                         startingOffsets="earliest"))
    start = reader.initialOffset()
    end = reader.latestOffset(start)
    assert [(s.start, s.end) for s in reader.partitions(start, end)] == [(0, 100)]
    client.send_messages(STREAM, "purged-stream", [b"old 100"], 0)
    more = reader.latestOffset(end)
    assert [(s.start, s.end) for s in reader.partitions(end, more)] == [(100, 101)]
    _refill_after_purge(client, "purged-stream", 150)
    latest = reader.latestOffset(more)
    with pytest.raises(LurcherSparkError,
                       match="not the one there when the checkpointed offset 101 was taken"):
        reader.partitions(more, latest)


@pytest.mark.parametrize("option, value", [
    ("startingOffsets", '{"0": "earliest", "7": 3}'),
    ("endingOffsets", '{"9": "latest"}'),
    ("startingTimestamp", '{"1": 0}'),
    ("endingTimestamp", '{"0": 5, "2": 9}'),
])
def test_offsets_for_partitions_the_topic_lacks_are_refused(module_server, client, option,
                                                            value):
    """A per-partition map naming a partition the topic does not have was ignored (the
    read then started or ended at the default there, silently)."""
    if "named-partitions" not in {t.name for t in client.get_topics(STREAM)}:
        client.create_topic(STREAM, "named-partitions", partitions_count=1)
    opts = options(module_server, "named-partitions", **{option: value})
    with pytest.raises(LurcherSparkError, match=f"'{option}' names partitions"):
        plan_batch(opts, RowBounds())
    if option.startswith("starting"):
        with pytest.raises(LurcherSparkError, match=f"'{option}' names partitions"):
            LurcherStreamReader(opts).initialOffset()


@pytest.mark.parametrize("option", ["endingOffsets", "endingTimestamp"])
def test_a_streaming_read_refuses_an_end(module_server, option):
    """A streaming read ignored endingOffsets / endingTimestamp and ran on past them."""
    with pytest.raises(LurcherSparkError, match=f"'{option}' is for batch reads"):
        stream_reader(options(module_server, "any", **{option: "latest" if "Off" in option
                                                        else "2030-01-01"}))
