"""Writers: ``df.write.format("lurcher")`` and ``writeStream`` (Arrow-based).

Columns (other columns are ignored):

    payload   binary or string, required; at most 64,000,000 bytes (Iggy's limit)
    partition integer: send to this partition id (wins over key)
    key       binary or string: messages-key partitioning (the server hashes it)
    headers   map<string, binary|string|boolean|number>: user headers (keys as string
              headers; binary values as raw headers, strings as string headers,
              numbers/booleans typed; other value types are refused on the driver; an
              entry whose value is null is left out: a header cannot be empty)
    id        binary (16 bytes, big-endian / UUID order), string (a UUID) or integer;
              null or absent: the server assigns one

Rows without partition and key go balanced. Each Spark task connects once and sends its
rows in batches of at most ``sendMessages`` messages and ``SEND_BYTES`` (16 MiB; a larger
message goes alone) (``MessageBatch`` via the SDK's ``build_batch``), one batch per target
(partition id, key or balanced), keeping the order of rows within a target.

Delivery of ``df.write`` (batch) is at-least-once: a retried task or job sends its rows
again, and only rows with an ``id`` are then dropped by the server's deduplication.

``writeStream`` is exactly-once (``exactlyOnce``, default true) together with the
server's message deduplication: a row without an ``id`` gets one derived from where it
comes from, ``(query id, micro-batch id, Spark partition, row position in the task)``
(``RowOrigin``), and a row without ``partition`` or ``key`` goes to a partition derived
from that id instead of a balanced one. Spark replays an unfinished micro-batch after a
failure or restart with the same offsets, so with a deterministic plan (the same rows in
the same order per Spark partition, e.g. a lurcher source and row-wise transforms) every
replayed row carries the id and partition it had the first time, and the server drops it
as a duplicate. The server must run with ``system.message_deduplication.enabled = true``,
an ``expiry`` longer than the longest time between a micro-batch's first attempt and its
replay (restart time plus trigger interval plus batch duration), and ``max_entries`` at
least the messages one partition receives in that time (0 = no limit). The window is in
the server's memory (as in Iggy), so a replay after a server restart stores again what the
first attempt stored; ``Placement`` spreads rows over the topic's partitions of the moment,
so a replay after partitions were added or deleted sends those rows elsewhere (duplicates).

``check_columns`` refuses a schema without ``payload`` or with a column of the wrong type;
a stream or topic that does not exist fails on the driver before any task runs; an Iggy
error inside a task fails the task with a ``LurcherSparkError`` naming the Iggy error. The
rows of each Arrow batch are all checked before the first is sent (a bad payload, id,
header, key or a partition the topic lacks stores none of the batch; batches sent
before it stay stored).
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructType,
)

from lurcher.core.wire.batch import HEADER_BYTES, INDEX_ENTRY_BYTES, MAX_PAYLOAD_BYTES
from lurcher.core.wire.buffer import U32_MAX, U128_MAX
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.units import shown
from lurcher.core.wire.values.partitioning import Partitioning
from lurcher.sdk.messages import build_batch, encode_header_block
from lurcher.sdk.sync import SyncClient
from lurcher.spark.client import connected, describe_topic
from lurcher.spark.options import LurcherSparkError, SourceOptions

try:  # PySpark >= 4.1
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
except ImportError:  # pragma: no cover
    DataSourceStreamArrowWriter = None  # type: ignore[assignment,misc]

_INTEGERS = (ByteType, ShortType, IntegerType, LongType)
_ACCEPTED = {
    "payload": (BinaryType, StringType),
    "key": (BinaryType, StringType),
    "partition": _INTEGERS,
    "headers": (MapType,),
    "id": (BinaryType, StringType, *_INTEGERS),
}
# headers value types that have a header kind (lurcher.sdk.messages.header_value), and
# void (every value null: entries left out)
_HEADER_VALUES = (BinaryType, StringType, BooleanType, FloatType, DoubleType, NullType,
                  *_INTEGERS)
BALANCED = -1
# Most bytes of messages in one SendMessages request (a single larger message goes alone):
# well below the server's limits.max_send_payload_bytes (default 64 MiB).
SEND_BYTES = 16 << 20
KEYED_BASE = 1 << 32  # group codes: partition id < 2**32 <= KEYED_BASE + key index


def check_columns(schema: StructType) -> None:
    """Raises LurcherSparkError unless ``payload`` exists and known columns have usable types."""
    fields = {f.name: f.dataType for f in schema.fields}
    if "payload" not in fields:
        raise LurcherSparkError(
            f"lurcher write needs a 'payload' column (binary or string); got {sorted(fields)}")
    for name, accepted in _ACCEPTED.items():
        if name in fields and not isinstance(fields[name], accepted):
            kinds = " or ".join(t.__name__.removesuffix("Type").lower() for t in accepted)
            raise LurcherSparkError(f"lurcher write: column {name!r} must be {kinds}, "
                                    f"not {fields[name].simpleString()}")
    headers = fields.get("headers")
    if isinstance(headers, MapType) and not isinstance(headers.keyType, StringType):
        raise LurcherSparkError("lurcher write: 'headers' keys must be strings")
    if isinstance(headers, MapType) and not isinstance(headers.valueType, _HEADER_VALUES):
        raise LurcherSparkError(
            "lurcher write: 'headers' values must be binary, string, boolean, integers, float or "
            f"double (what a header kind holds), not {headers.valueType.simpleString()}")


def check_target(options: SourceOptions) -> None:
    """Raises LurcherSparkError (naming the Iggy error) when the stream or topic is missing."""
    what = f"write to stream {options.stream!r}, topic {options.topic!r}"
    with connected(options.config, what) as client:
        describe_topic(client, options.stream, options.topic)


# -- where a streaming row comes from --------------------------------------------------------

QUERY_ID_PROPERTY = "sql.streaming.queryId"  # Spark's task-local properties of a micro-batch
BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclasses.dataclass(frozen=True)
class RowOrigin:
    """A streaming task's rows: query id (kept in the checkpoint), micro-batch id, Spark
    partition. Row ``i`` of the task gets id ``prefix << 64 | (i + 1)``: never 0, equal
    on every attempt of the same micro-batch, distinct between tasks unless two 64-bit
    prefixes collide."""

    query_id: str
    batch_id: int
    task_partition: int

    @classmethod
    def of_task(cls) -> "RowOrigin":
        """The running task's origin. Raises LurcherSparkError outside a micro-batch."""
        context = TaskContext.get()
        query_id = context.getLocalProperty(QUERY_ID_PROPERTY) if context else None
        batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context else None
        if query_id is None or batch_id is None:
            raise LurcherSparkError("lurcher exactly-once writeStream: Spark did not tell the "
                                    "task its query and batch id")
        return cls(query_id, int(batch_id), context.partitionId())

    @property
    def prefix(self) -> int:
        key = f"{self.query_id}/{self.batch_id}/{self.task_partition}".encode()
        return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")

    def ids(self, first_row: int, count: int) -> list[int]:
        base = self.prefix << 64
        return list(range(base + first_row + 1, base + first_row + count + 1))


# -- column conversion ----------------------------------------------------------------------

def _binary_list(column: pa.Array) -> list[bytes | None]:
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    return column.to_pylist()


def _id_value(value: object) -> int:
    """A row's id (0 for null). Raises ValueError for one outside u128."""
    if value is None:
        return 0
    if isinstance(value, bytes):
        number = int.from_bytes(value, "big")
    elif isinstance(value, str):
        number = uuid.UUID(value).int
    else:
        number = int(value)  # type: ignore[call-overload]
    if not 0 <= number <= U128_MAX:
        raise ValueError(f"{shown(value)} is not a 128-bit unsigned id")
    return number


def _ids(batch: pa.RecordBatch, derived: list[int] | None) -> list[int] | None:
    """Each row's id: the ``id`` column, else (null or no column) the ``derived`` one, else 0."""
    if "id" not in batch.schema.names:
        return derived
    try:
        given = [_id_value(v) for v in batch.column("id").to_pylist()]
    except ValueError as e:
        raise LurcherSparkError(f"lurcher write: bad value in column 'id': {e}") from None
    if derived is None:
        return given
    return [g or d for g, d in zip(given, derived)]


def _headers(batch: pa.RecordBatch) -> list[bytes] | None:
    if "headers" not in batch.schema.names:
        return None
    return [encode_header_block({k: v for k, v in pairs if v is not None}) if pairs else b""
            for pairs in batch.column("headers").to_pylist()]


def _group_codes(batch: pa.RecordBatch,
                 balanced: np.ndarray | None = None) -> tuple[np.ndarray, list[bytes]]:
    """(per-row group code, keys): a partition id, KEYED_BASE + key index, or BALANCED
    (or the row's entry of ``balanced``, partition ids, when given)."""
    codes = (np.full(batch.num_rows, BALANCED, dtype=np.int64) if balanced is None
             else balanced.astype(np.int64))
    keys: list[bytes] = []
    if "key" in batch.schema.names:
        encoded = batch.column("key").dictionary_encode()
        keys = _binary_list(encoded.dictionary)
        index = encoded.indices.to_numpy(zero_copy_only=False)
        valid = ~np.asarray(encoded.is_null())
        codes[valid] = KEYED_BASE + index[valid].astype(np.int64)
    if "partition" in batch.schema.names:
        column = batch.column("partition")
        valid = ~np.asarray(column.is_null())
        values = _partition_ids(column.fill_null(0).to_numpy(zero_copy_only=False))
        codes[valid] = values[valid]
    return codes, keys


def _partition_ids(values: np.ndarray) -> np.ndarray:
    """``values`` as int64 partition ids. Raises LurcherSparkError for one outside u32 (a
    larger one would read as a key's group code, ``KEYED_BASE``)."""
    if len(values) and (values.min() < 0 or values.max() > U32_MAX):
        raise LurcherSparkError(
            f"lurcher write: value in column 'partition' outside 0..{U32_MAX}")
    return values.astype(np.int64)


def _partitioning(code: int, keys: list[bytes]) -> Partitioning:
    if code == BALANCED:
        return Partitioning.balanced()
    if code < KEYED_BASE:
        return Partitioning.partition(code)
    return Partitioning.messages_key(keys[code - KEYED_BASE])


def _check_known(codes: np.ndarray, partition_ids: np.ndarray) -> None:
    """Raises IggyError PARTITION_NOT_FOUND when a group code names a partition id that is
    not one of ``partition_ids`` (the topic's)."""
    named = codes[(codes >= 0) & (codes < KEYED_BASE)]
    missing = np.setdiff1d(named, partition_ids)
    if len(missing):
        raise IggyError(ErrorCode.PARTITION_NOT_FOUND,
                        f"column 'partition': {missing[:10].tolist()} not among the topic's "
                        f"{len(partition_ids)} partitions")


def groups(batch: pa.RecordBatch, balanced: np.ndarray | None = None,
           partition_ids: np.ndarray | None = None
           ) -> list[tuple[Partitioning, np.ndarray]]:
    """(partitioning, row indices in input order) for every target of ``batch``. Raises
    IggyError for a key that cannot be one (empty, over 255 bytes) and, with
    ``partition_ids`` (the topic's), PARTITION_NOT_FOUND for a partition it lacks."""
    codes, keys = _group_codes(batch, balanced)
    unique, inverse = np.unique(codes, return_inverse=True)
    if partition_ids is not None:
        _check_known(unique, partition_ids)
    order = np.argsort(inverse, kind="stable")
    bounds = np.cumsum(np.bincount(inverse, minlength=len(unique)))
    begins = [0, *bounds.tolist()[:-1]]
    return [(_partitioning(code, keys), order[begin:stop])
            for code, begin, stop in zip(unique.tolist(), begins, bounds.tolist())]


def _pick(values: list | None, rows: list[int]) -> list | None:
    return None if values is None else [values[i] for i in rows]


@dataclasses.dataclass
class Placement:
    """How an exactly-once task places rows: derived ids from ``origin`` for rows
    ``next_row`` on, and one of ``partition_ids`` (round robin from a place the origin
    picks) for rows that name no partition or key."""

    origin: RowOrigin
    partition_ids: np.ndarray
    next_row: int = 0

    def take(self, count: int) -> tuple[list[int], np.ndarray]:
        """(ids, partition ids) of the next ``count`` rows."""
        ids = self.origin.ids(self.next_row, count)
        n = len(self.partition_ids)
        first = (self.origin.prefix + self.next_row) % n
        spread = self.partition_ids[(first + np.arange(count, dtype=np.int64)) % n]
        self.next_row += count
        return ids, spread


def send_record_batch(client: SyncClient, options: SourceOptions, batch: pa.RecordBatch,
                      placement: Placement | None = None,
                      partition_ids: np.ndarray | None = None) -> int:
    """Sends every row of ``batch``; returns how many. Every row is checked before the
    first is sent (payload, id, headers, key and, with ``partition_ids``, the topic's,
    partition), so a bad row fails the batch with none of it stored. Raises IggyError,
    LurcherSparkError."""
    payloads = _binary_list(batch.column("payload"))
    if any(p is None for p in payloads):
        raise LurcherSparkError("lurcher write: column 'payload' has a null value")
    payload_sizes = _payload_sizes(payloads)
    derived, spread = placement.take(batch.num_rows) if placement else (None, None)
    ids, headers = _ids(batch, derived), _headers(batch)
    sizes = _message_sizes(payload_sizes, headers)
    for partitioning, rows in groups(batch, spread, partition_ids):
        for begin, end in chunks(sizes[rows], options.send_messages, SEND_BYTES):
            chunk = rows[begin:end].tolist()
            messages = build_batch(_pick(payloads, chunk), _pick(ids, chunk),
                                   _pick(headers, chunk))
            client.send_messages(options.stream, options.topic, messages, partitioning)
    return batch.num_rows


def _payload_sizes(payloads: list[bytes]) -> np.ndarray:
    """Each payload's length. Raises IggyError TOO_BIG_MESSAGE_PAYLOAD (as Iggy's message
    builder) for one over ``MAX_PAYLOAD_BYTES``, before any row of the batch is sent."""
    sizes = np.fromiter(map(len, payloads), dtype=np.int64, count=len(payloads))
    too_big = np.flatnonzero(sizes > MAX_PAYLOAD_BYTES)
    if len(too_big):
        row = int(too_big[0])
        raise IggyError(ErrorCode.TOO_BIG_MESSAGE_PAYLOAD,
                        f"column 'payload': {int(sizes[row])} bytes in row {row} of a batch, "
                        f"over {MAX_PAYLOAD_BYTES}")
    return sizes


def _message_sizes(payload_sizes: np.ndarray, headers: list[bytes] | None) -> np.ndarray:
    """Each row's bytes in a SendMessages request (header, index entry, payload, headers)."""
    sizes = payload_sizes.copy()
    if headers is not None:
        sizes += np.fromiter(map(len, headers), dtype=np.int64, count=len(headers))
    return sizes + HEADER_BYTES + INDEX_ENTRY_BYTES


def chunks(sizes: np.ndarray, max_count: int, max_bytes: int) -> list[tuple[int, int]]:
    """Consecutive ``[begin, end)`` over rows of ``sizes`` bytes: at most ``max_count`` rows
    and ``max_bytes`` bytes each, but always at least one row."""
    total = np.concatenate(([0], np.cumsum(sizes)))
    pieces = []
    begin = 0
    while begin < len(sizes):
        fits = int(np.searchsorted(total, total[begin] + max_bytes, side="right")) - 1
        end = min(max(fits, begin + 1), begin + max_count)
        pieces.append((begin, end))
        begin = end
    return pieces


@dataclasses.dataclass
class WriteReport(WriterCommitMessage):
    """What one task sent."""

    messages: int


def write_batches(options: SourceOptions, batches: Iterator[pa.RecordBatch],
                  origin: RowOrigin | None = None) -> WriteReport:
    """Executor side: one connection, every batch sent; with ``origin``, rows are placed
    exactly-once (``Placement``). Raises LurcherSparkError."""
    sent = 0
    with connected(options.config, f"write to stream {options.stream!r}, "
                                   f"topic {options.topic!r}") as client:
        layout = describe_topic(client, options.stream, options.topic)
        partition_ids = np.array(sorted(layout.ends), dtype=np.int64)
        placement = Placement(origin, partition_ids) if origin is not None else None
        for batch in batches:
            if batch.num_rows:
                sent += send_record_batch(client, options, batch, placement, partition_ids)
    return WriteReport(sent)


class LurcherWriter(DataSourceArrowWriter):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteReport:
        return write_batches(self.options, iterator)

    def commit(self, messages: list) -> None:
        """Nothing to do: every task's messages are already stored."""

    def abort(self, messages: list) -> None:
        """Nothing to undo: a stream cannot take back messages already sent."""


if DataSourceStreamArrowWriter is not None:
    class LurcherStreamWriter(DataSourceStreamArrowWriter):
        def __init__(self, options: SourceOptions) -> None:
            self.options = options

        def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteReport:
            origin = RowOrigin.of_task() if self.options.exactly_once else None
            return write_batches(self.options, iterator, origin)

        def commit(self, messages: list, batchId: int) -> None:
            """Nothing to do: the micro-batch's messages are already stored."""

        def abort(self, messages: list, batchId: int) -> None:
            """Nothing to undo: a replay of the batch resends the same ids."""
