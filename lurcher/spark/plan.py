"""Planning and reading offset ranges: shared by the batch and the streaming reader.

``RangeSplit`` is one Spark input partition: ``[start, end)`` of one Iggy partition, with
the stream and topic names the rows carry. ``plan_batch`` resolves the options
(starting/ending offsets and timestamps) and the pushed-down ``RowBounds`` into splits of
at most ``maxMessagesPerPartition`` messages; ``start_offsets`` gives a streaming query
its initial offset, ``checksums_before`` the checksums an offset carries and
``plan_stream`` a micro-batch's splits. ``read_split`` runs on executors: it polls its
range straight from lurcher and yields Arrow record batches.

Invariants: splits of one partition are disjoint and ordered; ``read_split`` yields only
offsets in ``[start, end)``, each once, ascending. With ``failOnDataLoss`` (default) a
range whose messages are no longer stored (retention) fails the task instead of
silently skipping them, and so does a range whose last message is not the one planned
(``RangeSplit.last_checksum``: the topic was purged and refilled in between, so the
offsets hold other messages; checked after each poll, before its rows are yielded), and a
micro-batch whose start offset's message before it is not the one the checkpoint saw (purged and
refilled past the checkpoint, whether the query ran or was stopped meanwhile).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.sdk.sync import SyncClient
from lurcher.spark.arrow import record_batch
from lurcher.spark.client import (
    TopicLayout,
    checksum_at,
    connected,
    describe_topic,
    first_offset,
    offset_at_timestamp,
    poll_range,
)
from lurcher.spark.filters import UNBOUNDED, RowBounds
from lurcher.spark.offsets import (
    EARLIEST,
    LATEST,
    Position,
    offset_checksums,
    offset_positions,
    parse_offsets,
    parse_timestamps,
    position_for,
    split_range,
    stream_offset,
    timestamp_for,
)
from lurcher.spark.options import LurcherSparkError, SourceOptions
from lurcher.spark.polled import PolledView


@dataclasses.dataclass(frozen=True)
class RangeSplit(InputPartition):
    """Offsets ``[start, end)`` of Iggy partition ``partition_id`` (one Spark task)."""

    stream: str
    topic: str
    partition_id: int
    start: int
    end: int
    last_checksum: int | None = None  # of the message at end - 1 when planned


def fingerprinted(client: SyncClient, layout: TopicLayout, partition_id: int,
                  ranges: list[tuple[int, int]], last: int | None = None) -> list[RangeSplit]:
    """Splits of ``ranges`` of one partition, each with the checksum of its last message
    now (one poll of one message per split), or ``last`` for the last split when known.
    Raises IggyError."""
    return [RangeSplit(layout.stream, layout.topic, partition_id, start, end,
                       last if last is not None and i == len(ranges) - 1 else
                       checksum_at(client, layout.stream, layout.topic, partition_id, end - 1))
            for i, (start, end) in enumerate(ranges)]


def selected_partitions(options: SourceOptions, layout: TopicLayout,
                        bounds: RowBounds = RowBounds()) -> list[int]:
    """Partition ids to read: the ``partitions`` option (all by default) that the
    pushed-down bounds allow. Raises IggyError PARTITION_NOT_FOUND for an unknown id."""
    wanted = options.partitions if options.partitions is not None else sorted(layout.ends)
    missing = [p for p in wanted if p not in layout.ends]
    if missing:
        raise IggyError(ErrorCode.PARTITION_NOT_FOUND,
                        f"partitions {missing} of topic {layout.topic!r}")
    return [p for p in wanted if bounds.allows_partition(p)]


def check_named_partitions(options: SourceOptions, layout: TopicLayout) -> None:
    """Raises LurcherSparkError when a per-partition offsets or timestamps map names a
    partition the topic does not have (it was ignored: a typo read from the default)."""
    specs = {"startingOffsets": parse_offsets("startingOffsets", options.starting_offsets,
                                              LATEST),
             "endingOffsets": parse_offsets("endingOffsets", options.ending_offsets, LATEST),
             "startingTimestamp": parse_timestamps("startingTimestamp",
                                                   options.starting_timestamp),
             "endingTimestamp": parse_timestamps("endingTimestamp", options.ending_timestamp)}
    for option, spec in specs.items():
        unknown = sorted(set(spec) - set(layout.ends)) if isinstance(spec, dict) else []
        if unknown:
            raise LurcherSparkError(
                f"lurcher option {option!r} names partitions {unknown} that topic "
                f"{layout.topic!r} does not have (it has {len(layout.ends)})")


class _Resolver:
    """Positions and timestamps of one topic resolved to offsets (one client)."""

    def __init__(self, client: SyncClient, options: SourceOptions, layout: TopicLayout):
        self.client = client
        self.options = options
        self.layout = layout

    def offset(self, partition_id: int, position: Position) -> int:
        end = self.layout.ends[partition_id]
        if position == LATEST:
            return end
        if position == EARLIEST:
            return first_offset(self.client, self.options.stream, self.options.topic,
                                partition_id, end)
        return min(int(position), end)

    def at_timestamp(self, partition_id: int, timestamp_us: int) -> int:
        return offset_at_timestamp(self.client, self.options.stream, self.options.topic,
                                   partition_id, timestamp_us, self.layout.ends[partition_id])

    def start(self, partition_id: int, default: str) -> int:
        """Where reading begins (startingOffsets, then startingTimestamp if later)."""
        spec = parse_offsets("startingOffsets", self.options.starting_offsets, default)
        start = self.offset(partition_id, position_for(spec, partition_id, default))
        stamps = parse_timestamps("startingTimestamp", self.options.starting_timestamp)
        stamp = timestamp_for(stamps, partition_id)
        if stamp is not None:
            start = max(start, self.at_timestamp(partition_id, stamp))
        return start

    def end(self, partition_id: int) -> int:
        """Where a batch read stops (endingOffsets, then endingTimestamp if earlier)."""
        spec = parse_offsets("endingOffsets", self.options.ending_offsets, LATEST)
        end = self.offset(partition_id, position_for(spec, partition_id, LATEST))
        stamps = parse_timestamps("endingTimestamp", self.options.ending_timestamp)
        stamp = timestamp_for(stamps, partition_id)
        if stamp is not None:
            end = min(end, self.at_timestamp(partition_id, stamp))
        return end

    def bounded(self, partition_id: int, bounds: RowBounds) -> tuple[int, int]:
        """The batch range narrowed by pushed-down offset and timestamp bounds."""
        start = max(self.start(partition_id, EARLIEST), bounds.offset.lo)
        end = min(self.end(partition_id), bounds.offset.hi)
        if start < end and bounds.timestamp.lo > 0:
            start = max(start, self.at_timestamp(partition_id, bounds.timestamp.lo))
        if start < end and bounds.timestamp.hi < UNBOUNDED:
            end = min(end, self.at_timestamp(partition_id, bounds.timestamp.hi))
        return start, end


def read_description(options: SourceOptions) -> str:
    return f"read of stream {options.stream!r}, topic {options.topic!r}"


def plan_batch(options: SourceOptions, bounds: RowBounds) -> list[RangeSplit]:
    """Splits of a batch read. Raises LurcherSparkError (bad option, Iggy error)."""
    with connected(options.config, read_description(options)) as client:
        layout = describe_topic(client, options.stream, options.topic)
        check_named_partitions(options, layout)
        resolver = _Resolver(client, options, layout)
        splits = []
        for partition_id in selected_partitions(options, layout, bounds):
            start, end = resolver.bounded(partition_id, bounds)
            splits += fingerprinted(client, layout, partition_id, split_range(
                start, end, options.max_messages_per_partition))
        return splits


def start_offsets(options: SourceOptions) -> tuple[TopicLayout, dict]:
    """(layout, the first offset of a new streaming query: ``stream_offset`` of every
    selected partition's start, startingOffsets default ``latest``). Raises
    LurcherSparkError."""
    with connected(options.config, read_description(options)) as client:
        layout = describe_topic(client, options.stream, options.topic)
        check_named_partitions(options, layout)
        resolver = _Resolver(client, options, layout)
        positions = {str(p): resolver.start(p, LATEST)
                     for p in selected_partitions(options, layout)}
        return layout, stream_offset(positions, checksums_before(client, options, positions))


def end_offsets(options: SourceOptions) -> tuple[TopicLayout, dict[str, int]]:
    """(layout, {"<partition id>": end offset}) of every selected partition now."""
    with connected(options.config, read_description(options)) as client:
        return ends_now(client, options)


def ends_now(client: SyncClient, options: SourceOptions) -> tuple[TopicLayout, dict[str, int]]:
    """``end_offsets`` over an open client."""
    layout = describe_topic(client, options.stream, options.topic)
    return layout, {str(p): layout.ends[p] for p in selected_partitions(options, layout)}


def checksums_before(client: SyncClient, options: SourceOptions,
                     positions: dict[str, int], earlier: dict | None = None) -> dict[str, int]:
    """The checksum of the message before each of ``positions`` (what a checkpointed
    offset carries, ``offsets.stream_offset``): ``earlier``'s (a checkpointed offset) where
    its position is the same, else read from the server (one poll each). None at offset 0
    or where that message is no longer stored, and none at all without ``failOnDataLoss``
    (nothing would compare them). Raises IggyError."""
    if not options.fail_on_data_loss:
        return {}
    before = offset_positions(earlier or {})
    known = offset_checksums(earlier or {})
    found = {}
    for key, offset in positions.items():
        if key in known and before.get(key) == offset:
            found[key] = known[key]
        elif offset > 0:
            checksum = checksum_at(client, options.stream, options.topic, int(key), offset - 1)
            if checksum is not None:
                found[key] = checksum
    return found


def plan_stream(options: SourceOptions, ranges: dict[int, tuple[int, int]],
                at_start: dict[str, int], at_end: dict[str, int]) -> list[RangeSplit]:
    """Splits of a micro-batch's ``ranges`` (partition -> ``[start, end)``, non-empty).
    ``at_start`` and ``at_end``: the checksums its start and end offsets carry
    (``checksums_before``). Where the message before ``start`` is no longer the one the
    checkpoint saw, the topic was purged and refilled past it, and the new messages below
    ``start`` would be skipped: refused with ``failOnDataLoss``. A partition's last split
    takes its checksum from ``at_end``. Raises LurcherSparkError."""
    with connected(options.config, read_description(options)) as client:
        layout = describe_topic(client, options.stream, options.topic)
        splits = []
        for partition_id, (start, end) in sorted(ranges.items()):
            _check_continued(client, options, layout, partition_id, start,
                             at_start.get(str(partition_id)))
            splits += fingerprinted(client, layout, partition_id,
                                    split_range(start, end, options.max_messages_per_partition),
                                    at_end.get(str(partition_id)))
        return splits


def _check_continued(client: SyncClient, options: SourceOptions, layout: TopicLayout,
                     partition_id: int, start: int, checksum: int | None) -> None:
    if checksum is None or start == 0 or not options.fail_on_data_loss:
        return
    now = checksum_at(client, layout.stream, layout.topic, partition_id, start - 1)
    if now is not None and now != checksum:
        raise LurcherSparkError(
            f"lurcher read of stream {layout.stream!r}, topic {layout.topic!r}, partition "
            f"{partition_id}: the message at offset {start - 1} is not the one there when "
            f"the checkpointed offset {start} was taken (the topic was purged and refilled "
            f"past it?), so messages below offset {start} may have been missed; set "
            f"failOnDataLoss=false to continue")


def _lost(split: RangeSplit, expected: int, found: int) -> LurcherSparkError:
    return LurcherSparkError(
        f"lurcher read of stream {split.stream!r}, topic {split.topic!r}, partition "
        f"{split.partition_id}: offsets {expected}..{found - 1} are no longer stored "
        f"(deleted by retention?); set failOnDataLoss=false to skip them")


def _replaced(split: RangeSplit) -> LurcherSparkError:
    return LurcherSparkError(
        f"lurcher read of stream {split.stream!r}, topic {split.topic!r}, partition "
        f"{split.partition_id}: the message at offset {split.end - 1} is not the one there "
        f"when the read was planned (the topic was purged and refilled?), so offsets "
        f"{split.start}..{split.end - 1} may hold other messages; plan the read again, or "
        f"set failOnDataLoss=false to read what is there")


def _last_checksum(view: PolledView, end: int) -> int | None:
    """The checksum of the message at ``end - 1`` if ``view`` holds it."""
    if view.count and int(view.offsets[-1]) == end - 1:
        return int(view.checksums()[-1])
    return None


def _check_not_replaced(client: SyncClient, split: RangeSplit, view: PolledView) -> None:
    """Raise when the split's last message, as of after ``view`` was polled, is not the one
    planned: ``view`` itself when it holds it, else one poll of it. Checked before the rows
    of ``view`` go to Spark, which may stop at any batch (a ``limit``): checking only once
    the last message was read let the rows of a purged and refilled topic through."""
    if split.last_checksum is None:
        return
    now = _last_checksum(view, split.end)
    if now is None:
        now = checksum_at(client, split.stream, split.topic, split.partition_id, split.end - 1)
    if now != split.last_checksum:
        raise _replaced(split)


def _filtered(view: PolledView, bounds: RowBounds) -> PolledView:
    if bounds.offset.bounded:
        view = view.select(bounds.offset.mask(view.offsets))
    if bounds.timestamp.bounded and view.count:
        view = view.select(bounds.timestamp.mask(view.timestamps()))
    return view


def read_split(options: SourceOptions, bounds: RowBounds,
               split: RangeSplit) -> Iterator[pa.RecordBatch]:
    """The rows of ``split`` as record batches (executor side). Raises LurcherSparkError."""
    what = (f"read of stream {split.stream!r}, topic {split.topic!r}, partition "
            f"{split.partition_id}, offsets {split.start}..{split.end - 1}")
    with connected(options.config, what) as client:
        expected = split.start
        for view in poll_range(client, split.stream, split.topic, split.partition_id,
                               split.start, split.end, options.poll_messages):
            first = int(view.offsets[0])
            if first > expected and options.fail_on_data_loss:
                raise _lost(split, expected, first)
            expected = int(view.offsets[-1]) + 1
            if options.fail_on_data_loss:
                _check_not_replaced(client, split, view)
            view = _filtered(view, bounds)
            if view.count:
                yield record_batch(view, split.stream, split.topic)
        if expected < split.end and options.fail_on_data_loss:
            raise _lost(split, expected, split.end)
