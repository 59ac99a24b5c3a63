"""Unit tests of the data source's pure parts: offset specs, trigger budgets, filter
pushdown intervals, option parsing, and polled bytes -> Arrow (no Spark session, no server)."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

import numpy as np
import pytest

import pyspark  # noqa: F401  (the spark extra; part of .[dev])

from pyspark.sql.datasource import EqualTo, GreaterThan, In, LessThanOrEqual, Not  # noqa: E402

from lurcher.core.wire.headers import HeaderKind, HeaderValue, encode_headers  # noqa: E402
from lurcher.core.wire.responses.messages import Message, PolledMessages  # noqa: E402
from lurcher.spark.arrow import ARROW_SCHEMA, SCHEMA, record_batch  # noqa: E402
from lurcher.spark.filters import UNBOUNDED, Interval, RowBounds, push  # noqa: E402
from lurcher.spark.offsets import (  # noqa: E402
    cap_offsets,
    parse_offsets,
    parse_timestamps,
    split_range,
)
from lurcher.spark.options import LurcherSparkError, source_options  # noqa: E402
from lurcher.spark.polled import PolledView  # noqa: E402
from tests.support.server import REPO_ROOT  # noqa: E402


def test_offset_specs_like_kafka():
    assert parse_offsets("o", None, "earliest") == "earliest"
    assert parse_offsets("o", "latest", "earliest") == "latest"
    assert parse_offsets("o", '{"0": 5, "1": -2, "2": -1, "3": "latest"}', "x") == {
        0: 5, 1: "earliest", 2: "latest", 3: "latest"}
    for bad in ('{"a": 1}', '{"0": -7}', "[1]", "soon", '{"0": 1.5}',
                # out of u64 or u32, or not ASCII digits: each read another offset or
                # partition ('١٠' was 10, '{"1_0": 0}' partition 10), or was a ValueError
                str(2**64), "9" * 5000, "١٠", '{"١": 5}', '{"1_0": 0}', '{"4294967296": 0}'):
        with pytest.raises(LurcherSparkError):
            parse_offsets("o", bad, "earliest")
    assert parse_offsets("o", str(2**64 - 1), "earliest") == 2**64 - 1


def test_timestamps_numbers_iso_and_per_partition():
    assert parse_timestamps("t", "1700000000000000") == 1_700_000_000_000_000
    assert parse_timestamps("t", "2023-11-14T22:13:20Z") == 1_700_000_000_000_000
    assert parse_timestamps("t", "2023-11-14T22:13:20") == 1_700_000_000_000_000
    assert parse_timestamps("t", '{"1": 5}') == {1: 5}
    # before the epoch: a negative timestamp the poll request could not encode (a
    # struct.error from deep in the SDK)
    for bad in ("yesterday", "9" * 5000, str(2**64), "١", "1960-01-01",
                '{"0": "1969-12-31T23:59:59.999999Z"}'):
        with pytest.raises(LurcherSparkError):
            parse_timestamps("t", bad)


def test_split_range_covers_exactly():
    assert split_range(0, 0, 10) == []
    assert split_range(5, 30, 10) == [(5, 15), (15, 25), (25, 30)]


def test_cap_offsets_fair_and_bounded():
    start = {"0": 0, "1": 100, "2": 7}
    latest = {"0": 1000, "1": 103, "2": 7}
    end = cap_offsets(start, latest, 10)
    assert sum(end[p] - start[p] for p in end) == 10
    assert end["1"] == 103 and end["2"] == 7 and end["0"] == 7
    assert cap_offsets(start, latest, 10_000) == latest
    assert cap_offsets(start, latest, 1) == {"0": 0, "1": 101, "2": 7}


def test_push_keeps_only_supported_filters():
    moment = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    micros = 1_704_067_200_000_000
    filters = [GreaterThan(("offset",), 10), LessThanOrEqual(("timestamp",), moment),
               In(("partition",), (1, 3)), Not(EqualTo(("offset",), 12)),
               EqualTo(("payload",), b"x"), In(("offset",), (1, 2))]
    bounds, rest = push(RowBounds(), filters)
    assert rest == filters[3:] and all(a is b for a, b in zip(rest, filters[3:]))
    assert bounds.offset == Interval(11, UNBOUNDED)
    assert bounds.timestamp == Interval(0, micros + 1)
    assert bounds.allows_partition(3) and not bounds.allows_partition(2)
    bounds, _ = push(bounds, [EqualTo(("offset",), 5)])
    assert bounds.offset.lo >= bounds.offset.hi  # contradictory filters: empty


def test_options_connection_string_and_overrides():
    opts = source_options({"connection": "iggy://u:p@10.0.0.1:9000?tls=true", "stream": "s",
                           "topic": "t", "maxMessagesPerPartition": "7", "PAT": "secret"})
    assert opts.config.address == "10.0.0.1:9000" and opts.config.tls
    assert opts.config.token == "secret" and opts.config.username is None
    assert opts.max_messages_per_partition == 7
    with pytest.raises(LurcherSparkError, match="stream"):
        source_options({"topic": "t"})
    with pytest.raises(LurcherSparkError, match="pollMessages|pollmessages"):
        source_options({"stream": "s", "topic": "t", "pollMessages": "0"})
    # int() read other digits ('١٠' as 10, '٢' as partition 2) and '1_0'; a count past a
    # Java long failed in Spark's JVM (maxMessagesPerTrigger is its ReadMaxRows)
    for name, bad in (("maxMessagesPerPartition", "١٠"), ("pollMessages", "1_0"),
                      ("maxMessagesPerTrigger", str(1 << 63)), ("sendMessages", "+5"),
                      ("partitions", "0,٢"), ("partitions", "4294967296"),
                      ("partitions", "1_0")):
        with pytest.raises(LurcherSparkError, match=name.lower()):
            source_options({"stream": "s", "topic": "t", name: bad})
    assert source_options({"stream": "s", "topic": "t", "partitions": " 2, 0,,2",
                           "maxMessagesPerTrigger": " 007"}).partitions == (0, 2)
    # NaN reached the SDK's connect (a ValueError converting it), as did inf and negatives
    for bad in ("nan", "inf", "-1", "0", "1e999", "soon"):
        for name in ("connect_timeout_s", "request_timeout_s"):
            with pytest.raises(LurcherSparkError, match=name):
                source_options({"stream": "s", "topic": "t", name: bad})
    assert source_options({"stream": "s", "topic": "t",
                           "connect_timeout_s": "2.5"}).config.connect_timeout_s == 2.5


def _polled(messages: list[Message], partition_id: int = 2) -> PolledMessages:
    return PolledMessages.of(partition_id, messages[-1].offset, messages)


def test_record_batch_columns():
    headers = encode_headers({"trace": HeaderValue.of(HeaderKind.RAW, b"\x00\x01"),
                              "n": HeaderValue.of(HeaderKind.STRING, "x")})
    uid = 0x0123456789ABCDEF_FEDCBA9876543210
    messages = [Message(0, uid, 40, 1_700_000_000_000_001, 5, b"first", headers),
                Message(0, 7, 41, 1_700_000_000_000_002, 6, b"", b""),
                Message(0, 8, 42, 1_700_000_000_000_003, 7, b"third!" * 100, b"")]
    view = PolledView.of(_polled(messages))
    batch = record_batch(view, "s", "t")
    assert batch.schema.equals(ARROW_SCHEMA)
    rows = batch.to_pylist()
    assert [r["offset"] for r in rows] == [40, 41, 42]
    assert [r["payload"] for r in rows] == [b"first", b"", b"third!" * 100]
    assert rows[0]["id"] == uid.to_bytes(16, "big")
    assert dict(rows[0]["headers"]) == {"trace": b"\x00\x01", "n": b"x"}
    assert rows[1]["headers"] == [] and rows[2]["partition"] == 2
    assert rows[0]["stream"] == "s" and rows[2]["topic"] == "t"
    assert int(rows[2]["timestamp"].timestamp() * 1e6) == 1_700_000_000_000_003


def test_arrow_schema_is_the_one_spark_derives():
    from pyspark.sql.pandas.types import to_arrow_schema

    spark_schema = to_arrow_schema(SCHEMA, timezone="UTC")
    assert ARROW_SCHEMA.equals(spark_schema, check_metadata=True)
    assert str(ARROW_SCHEMA) == str(spark_schema)  # nullability of the map's entries too


def test_stream_and_topic_columns_repeat_any_name():
    messages = [Message(0, 1, o, 10, 10, b"p") for o in range(3)]
    batch = record_batch(PolledView.of(_polled(messages)), "str\u00e9am-\u6d41", "")
    assert batch.column("stream").to_pylist() == ["str\u00e9am-\u6d41"] * 3
    assert batch.column("topic").to_pylist() == [""] * 3
    batch.validate(full=True)


def test_a_column_past_arrows_2_gib_is_a_clear_error():
    from lurcher.spark.arrow import _binary, _repeated

    with pytest.raises(LurcherSparkError, match="pollMessages"):
        _repeated("s" * 255, 9_000_000)  # refused before 2.3 GB of names are made
    with pytest.raises(LurcherSparkError, match="over Arrow's"):
        _binary(np.array([0, 1 << 31], dtype=np.int64), b"")


def test_rows_are_built_without_pandas_or_pyarrow_compute():
    """A Python worker Spark starts afresh (after every ``limit`` that stops reading early)
    builds its rows without importing pandas (about half a second each time)."""
    code = ("import sys; from lurcher.core.wire.responses.messages import Message, PolledMessages;"
            "from lurcher.spark.arrow import record_batch; from lurcher.spark.polled import PolledView;"
            "m = [Message(0, 1, o, 10, 10, b'p') for o in range(3)];"
            "record_batch(PolledView.of(PolledMessages.of(0, 2, m)), 's', 't').validate(full=True);"
            "print(sorted(n for n in ('pandas', 'pyarrow.compute') if n in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[]"


def test_view_below_and_truncated_tail():
    messages = [Message(0, 1, o, 10, 10, b"p%d" % o) for o in range(5)]
    polled = _polled(messages)
    view = PolledView.of(polled)
    assert view.below(3).offsets.tolist() == [0, 1, 2]
    cut = PolledMessages(2, 4, 5, bytes(polled.data)[:-1])
    assert PolledView.of(cut).count == 4
    keep = view.select(np.array([True, False, True, False, True]))
    assert [r["payload"] for r in record_batch(keep, "s", "t").to_pylist()] == [b"p0", b"p2",
                                                                                b"p4"]


def test_row_origin_ids_repeat_per_attempt_and_differ_between_tasks():
    from lurcher.spark.writer import RowOrigin

    origin = RowOrigin("query-1", 7, 0)
    assert origin.ids(0, 3) == RowOrigin("query-1", 7, 0).ids(0, 3)
    assert origin.ids(2, 2) == origin.ids(0, 4)[2:]
    assert 0 not in origin.ids(0, 1000)
    others = [RowOrigin("query-1", 8, 0), RowOrigin("query-1", 7, 1), RowOrigin("query-2", 7, 0)]
    mine = set(origin.ids(0, 100))
    assert all(mine.isdisjoint(o.ids(0, 100)) for o in others)


def test_placement_spreads_unplaced_rows_and_keeps_explicit_targets():
    import pyarrow as pa

    from lurcher.spark.writer import Placement, RowOrigin, groups

    placement = Placement(RowOrigin("q", 1, 0), np.array([0, 1, 2]))
    ids, spread = placement.take(6)
    again = Placement(RowOrigin("q", 1, 0), np.array([0, 1, 2]))
    assert again.take(4)[1].tolist() + again.take(2)[1].tolist() == spread.tolist()
    assert sorted(spread.tolist()) == [0, 0, 1, 1, 2, 2]
    batch = pa.record_batch({"payload": [b"a", b"b", b"c", b"d", b"e", b"f"],
                             "partition": pa.array([None, 2, None, None, 0, None], pa.int32())})
    targets = {1: 2, 4: 0}  # explicit partitions win over the spread
    expected: dict[int, list[int]] = {}
    for i in range(6):
        expected.setdefault(targets.get(i, int(spread[i])), []).append(i)
    found = {tuple(rows.tolist()) for _, rows in groups(batch, spread)}
    assert found == {tuple(rows) for rows in expected.values()}
    assert len(ids) == 6 and len(set(ids)) == 6


def test_send_chunks_bounded_by_count_and_bytes():
    from lurcher.spark.writer import chunks

    sizes = np.array([10, 10, 10, 50, 10, 10], dtype=np.int64)
    assert chunks(sizes, 100, 30) == [(0, 3), (3, 4), (4, 6)]
    assert chunks(sizes, 2, 1000) == [(0, 2), (2, 4), (4, 6)]
    assert chunks(sizes, 100, 5) == [(i, i + 1) for i in range(6)]
    assert chunks(sizes[:0], 10, 10) == []
