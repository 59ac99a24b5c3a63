"""The source's row schema and the conversion of polled messages into Arrow record batches.

Schema (``SCHEMA``), one row per message:

    stream string, topic string, partition int, offset long,
    timestamp timestamp, origin_timestamp timestamp   (microsecond precision, UTC)
                   origin_timestamp is the client's u64 as sent: NULL where it lies
                   past 9999-12-31T23:59:59.999999Z, the end of Spark's timestamp range
                   (Python's too: one such value would fail a whole ``collect()``)
    id binary      the 128-bit message id as 16 big-endian bytes (UUID byte order)
    headers map<string, binary>   user headers: key as text (a string key as itself
                                  unless it begins "<kind>:", others and those
                                  "<kind>:<value>", ``headers.key_text``), value as
                                  its raw bytes (little-endian for numbers)
    payload binary

Every column is built with numpy over the poll's bytes (``PolledView``): fields by
gathers, payload bytes by a mask of their ranges, ids by a byte swap. User headers are
decoded per message, only for messages that have any. ``ARROW_SCHEMA`` is the Arrow schema
Spark derives from ``SCHEMA`` (``pyspark.sql.pandas.types.to_arrow_schema``, UTC), so Spark
accepts the batches as they are; it is written out in pyarrow types (a test compares the
two) because a Python worker that starts afresh (Spark replaces one after every ``limit`` or
``show`` that stops reading early) would otherwise import pandas for it. Nothing here calls
pyarrow.compute either: its ``take`` imports pandas too (about 0.5 s a fresh worker).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from lurcher.core.wire.batch import HEADER_BYTES
from lurcher.core.wire.headers import decode_headers, key_text
from lurcher.spark.options import LurcherSparkError
from lurcher.spark.polled import PolledView

SCHEMA = StructType([
    StructField("stream", StringType(), False),
    StructField("topic", StringType(), False),
    StructField("partition", IntegerType(), False),
    StructField("offset", LongType(), False),
    StructField("timestamp", TimestampType(), False),
    StructField("origin_timestamp", TimestampType(), True),
    StructField("id", BinaryType(), False),
    StructField("headers", MapType(StringType(), BinaryType(), True), False),
    StructField("payload", BinaryType(), False),
])
ID_BYTES = 16
INT64_MAX = np.uint64((1 << 63) - 1)
LAST_SPARK_MICROS = np.uint64(253_402_300_799_999_999)  # 9999-12-31T23:59:59.999999Z
MAX_ARROW_BINARY_BYTES = (1 << 31) - 1
_UTC_MICROS = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA = pa.schema([
    pa.field("stream", pa.string(), False),
    pa.field("topic", pa.string(), False),
    pa.field("partition", pa.int32(), False),
    pa.field("offset", pa.int64(), False),
    pa.field("timestamp", _UTC_MICROS, False),
    pa.field("origin_timestamp", _UTC_MICROS, True),
    pa.field("id", pa.binary(), False),
    pa.field("headers", pa.map_(pa.string(), pa.binary()), False),
    pa.field("payload", pa.binary(), False),
])


def _check_column_bytes(total: int, kind: pa.DataType) -> None:
    """Raises LurcherSparkError when a binary or string column of ``total`` bytes is past
    Arrow's 2 GiB (32-bit offsets)."""
    if total > MAX_ARROW_BINARY_BYTES:
        raise LurcherSparkError(
            f"lurcher read: one poll's {kind} column holds {total} bytes, over Arrow's "
            f"{MAX_ARROW_BINARY_BYTES}; lower the pollMessages option")


def _binary(offsets: np.ndarray, values: Any, kind: pa.DataType = pa.binary()) -> pa.Array:
    """A binary (or string) column from its offsets (n + 1) and concatenated bytes.
    Raises LurcherSparkError past 2 GiB (``_check_column_bytes``)."""
    n = len(offsets) - 1
    _check_column_bytes(int(offsets[-1]), kind)
    return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(offsets.astype(np.int32)),
                                           pa.py_buffer(values)])


def _fixed(values: np.ndarray, kind: pa.DataType) -> pa.Array:
    """A column of fixed-width ``values`` (their dtype has ``kind``'s width), from their
    buffer: ``pa.array`` would import pandas (module docstring)."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)])


def _joined(items: list[bytes], kind: pa.DataType) -> pa.Array:
    """A binary (or, for UTF-8 ``items``, string) column of ``items``."""
    offsets = np.zeros(len(items) + 1, dtype=np.int64)
    np.cumsum([len(item) for item in items], out=offsets[1:])
    return _binary(offsets, b"".join(items), kind)


def ranges_bytes(data: memoryview | bytes, starts: np.ndarray,
                 lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets int64[n+1], concatenated bytes) of the byte ranges ``[s, s+len)``.

    The ranges must be ascending and never touch (message payloads: a 64-byte header lies
    between any two); an empty range contributes nothing.
    """
    offsets = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    marks = np.zeros(len(data) + 1, dtype=np.int8)
    marks[starts] = 1
    marks[starts + lengths] -= 1
    inside = np.cumsum(marks[:-1], dtype=np.int8).view(np.bool_)
    return offsets, np.frombuffer(data, dtype=np.uint8)[inside]


def _repeated(text: str, n: int) -> pa.Array:
    """A string column of ``n`` times ``text``, built from its buffers."""
    encoded = text.encode()
    _check_column_bytes(n * len(encoded), pa.string())  # before the bytes are made
    return _binary(np.arange(n + 1, dtype=np.int64) * len(encoded), encoded * n, pa.string())


def _timestamps(values: np.ndarray) -> pa.Array:
    """Server timestamps (stamped from the server's clock: always in Spark's range)."""
    return _fixed(np.minimum(values, INT64_MAX).astype(np.int64), _UTC_MICROS)


def _origin_timestamps(values: np.ndarray) -> pa.Array:
    """Client timestamps: NULL for each past ``LAST_SPARK_MICROS`` (none clamped)."""
    beyond = values > LAST_SPARK_MICROS
    if not beyond.any():
        return _timestamps(values)
    micros = np.where(beyond, np.uint64(0), values).astype(np.int64)
    valid = np.packbits(~beyond, bitorder="little")
    return pa.Array.from_buffers(_UTC_MICROS, len(values),
                                 [pa.py_buffer(valid), pa.py_buffer(micros)],
                                 null_count=int(beyond.sum()))


def _ids(view: PolledView) -> pa.Array:
    lo, hi = view.ids()
    words = np.empty((view.count, 2), dtype=">u8")
    words[:, 0] = hi
    words[:, 1] = lo
    offsets = np.arange(0, ID_BYTES * view.count + 1, ID_BYTES, dtype=np.int32)
    return _binary(offsets, words.view(np.uint8).reshape(-1))


def _header_pairs(block: memoryview) -> list[tuple[str, bytes]]:
    return [(key_text(k), v.value) for k, v in decode_headers(block).items()]


def _headers(view: PolledView, payload_lengths: np.ndarray,
             header_lengths: np.ndarray, map_type: pa.DataType) -> pa.Array:
    offsets = np.zeros(view.count + 1, dtype=np.int32)
    keys: list[bytes] = []
    values: list[bytes] = []
    with_headers = np.flatnonzero(header_lengths)
    if len(with_headers):
        counts = np.zeros(view.count, dtype=np.int32)
        blocks = view.starts + HEADER_BYTES + payload_lengths
        data = memoryview(view.data)
        for i in with_headers.tolist():
            pairs = _header_pairs(data[blocks[i]:blocks[i] + header_lengths[i]])
            counts[i] = len(pairs)
            keys.extend(k.encode() for k, _ in pairs)
            values.extend(v for _, v in pairs)
        np.cumsum(counts, out=offsets[1:])
    return pa.MapArray.from_arrays(_fixed(offsets, pa.int32()), _joined(keys, pa.string()),
                                   _joined(values, pa.binary()), type=map_type)


def _payloads(view: PolledView, lengths: np.ndarray) -> pa.Array:
    offsets, values = ranges_bytes(view.data, view.starts + HEADER_BYTES, lengths)
    return _binary(offsets, values)


def record_batch(view: PolledView, stream: str, topic: str) -> pa.RecordBatch:
    """The rows of ``view`` as a RecordBatch of ``ARROW_SCHEMA``."""
    schema = ARROW_SCHEMA
    n = view.count
    payload_lengths, header_lengths = view.sizes()
    columns = [
        _repeated(stream, n), _repeated(topic, n),
        _fixed(np.full(n, view.partition_id, dtype=np.int32), pa.int32()),
        _fixed(view.offsets.astype(np.int64), pa.int64()),
        _timestamps(view.timestamps()), _origin_timestamps(view.origin_timestamps()),
        _ids(view),
        _headers(view, payload_lengths, header_lengths, schema.field("headers").type),
        _payloads(view, payload_lengths),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)
