"""Batch and streaming readers (``DataSourceReader`` / ``DataSourceStreamReader``).

Batch: ``partitions()`` plans one split per Iggy partition (more when a range exceeds
``maxMessagesPerPartition``); executors read their split straight from lurcher.
``LurcherPushdownReader`` adds ``pushFilters`` (Spark only calls it when
``spark.sql.python.filterPushdown.enabled`` is true, and refuses a reader that defines it
when that setting is off, hence two classes, chosen by the ``filterPushdown`` option).

Filter pushdown is only correct where Spark keeps a pushed-down reader to the one scan it
was pushed into (``plan_scoped_pushdown``). PySpark 4.1-4.3 store the reader and splits
of the last pushdown on the DataFrame's relation (``PythonDataSourceV2.setReadInfo``) and
reuse them for every later scan of that DataFrame that pushes nothing (a plain ``count``)
and for every other scan of it in the same plan (a union or self-join): a narrowed read
there returns too few or the wrong rows, and nothing in Python runs for those scans to
undo it. So on those versions the reader never narrows: ``filterPushdown`` defaults to
false and asking for it is refused with a ``LurcherSparkError``; Spark evaluates every
filter over complete reads, and narrow reads are asked for with the per-DataFrame
options (``partitions``, ``startingOffsets``/``endingOffsets``, timestamps).

Streaming: offsets are ``{"<partition id>": next offset to read}`` and the checksums of
the messages before them (``offsets.stream_offset``), checkpointed by Spark. A micro-batch
reads ``[start, end)`` per partition, planned deterministically from the two offsets
alone, so a batch replayed after a restart reads the same messages: with an idempotent
sink (file sinks) every message lands exactly once. ``maxMessagesPerTrigger`` caps a
micro-batch (Spark's ``ReadMaxRows``, PySpark >= 4.2). Partitions added to the topic later
are read from their first offset. A partition whose end falls below the checkpoint's
offset (topic purged, partition created again: offsets restart at 0) fails the query with
``failOnDataLoss`` (default), as Kafka's source does; without it reading goes on from the
new end (messages stored before that are skipped). A checkpointed partition the topic no
longer has (partitions deleted) fails it too (messages sent there after the last
micro-batch were never read); without ``failOnDataLoss`` it is dropped from the offset. A
purge refilled past the checkpoint's offset is seen from the checksum of the message
before a micro-batch's start, which the checkpointed offset carries (``plan.plan_stream``), also
across a restart of the query (not for a checkpoint written before offsets carried checksums).
``commitConsumer`` / ``commitConsumerGroup`` also store each committed micro-batch's end in
lurcher as consumer offsets (display only: the checkpoint stays the source of truth, and a
restart never reads them).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition

from lurcher.spark.client import TopicLayout, connected, store_progress
from lurcher.spark.filters import RowBounds, push
from lurcher.spark.offsets import (
    StreamOffset,
    cap_offsets,
    offset_checksums,
    offset_positions,
    stream_offset,
    went_back,
)
from lurcher.spark.options import LurcherSparkError, SourceOptions
from lurcher.spark.plan import (
    RangeSplit,
    checksums_before,
    end_offsets,
    ends_now,
    plan_batch,
    plan_stream,
    read_description,
    read_split,
    start_offsets,
)

try:  # PySpark >= 4.2: admission control
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
except ImportError:  # pragma: no cover - older PySpark calls latestOffset() without limits
    ReadAllAvailable = ReadLimit = ReadMaxRows = None  # type: ignore[assignment,misc]


def _read(options: SourceOptions, bounds: RowBounds,
          partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, RangeSplit):  # Spark's placeholder for "no splits"
        return iter(())
    return read_split(options, bounds, partition)


def plan_scoped_pushdown() -> bool:
    """Whether this PySpark keeps pushed-down reader state to the scan it was pushed into.

    Spark carries it in the scan since limit pushdown (``DataSourceReader.pushLimit``,
    SPARK-58551, after 4.3); every release before shares it between scans of a DataFrame.
    """
    return hasattr(DataSourceReader, "pushLimit")


def batch_reader(options: SourceOptions) -> "LurcherBatchReader":
    """The batch reader ``options`` ask for. Raises LurcherSparkError when they ask for
    filter pushdown on a PySpark where it would return wrong rows."""
    if not options.filter_pushdown:
        return LurcherBatchReader(options)
    if not plan_scoped_pushdown():
        import pyspark

        raise LurcherSparkError(
            f"lurcher option 'filterPushdown': PySpark {pyspark.__version__} reuses one "
            "scan's pushed-down filters for other scans of the same DataFrame (wrong rows), "
            "so lurcher does not push filters there; narrow a read with the options "
            "partitions, startingOffsets/endingOffsets or startingTimestamp/endingTimestamp")
    return LurcherPushdownReader(options)


def stream_reader(options: SourceOptions) -> "LurcherStreamReader":
    """The streaming reader. Raises LurcherSparkError for a batch-only option (a streaming
    read runs until it is stopped; an end given to it was ignored)."""
    for option, value in (("endingOffsets", options.ending_offsets),
                          ("endingTimestamp", options.ending_timestamp)):
        if value is not None and value.strip():
            raise LurcherSparkError(
                f"lurcher option {option!r} is for batch reads (spark.read): a streaming "
                "read runs until the query is stopped")
    return LurcherStreamReader(options)


class LurcherBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.bounds = RowBounds()

    def partitions(self) -> list[InputPartition]:
        """Raises LurcherSparkError (unknown stream/topic/partition, bad option)."""
        return list(plan_batch(self.options, self.bounds))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, self.bounds, partition)


class LurcherPushdownReader(LurcherBatchReader):
    def pushFilters(self, filters: list) -> list:
        """Keeps filters on partition/offset/timestamp (see ``filters``); returns the rest."""
        self.bounds, rest = push(self.bounds, filters)
        return rest


class LurcherStreamReader(DataSourceStreamReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def initialOffset(self) -> dict:
        return start_offsets(self.options)[1]

    def getDefaultReadLimit(self) -> "ReadLimit":
        limit = self.options.max_messages_per_trigger
        return ReadMaxRows(limit) if limit is not None else ReadAllAvailable()

    def latestOffset(self, start: dict | None = None,
                     limit: "ReadLimit | None" = None) -> dict:
        """Every partition's end, or less when ``limit`` caps the micro-batch, with the
        checksum of the message before each (``plan.checksums_before``)."""
        with connected(self.options.config, read_description(self.options)) as client:
            layout, latest = ends_now(client, self.options)
            if start is None:
                return stream_offset(latest, checksums_before(client, self.options, latest))
            positions = self._present(offset_positions(start), layout)
            begin = self._rebased({p: positions.get(p, 0) for p in latest}, latest)
            if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
                end = cap_offsets(begin, latest, limit.max_rows)
            else:
                end = {p: max(latest[p], begin[p]) for p in latest}
            ends = {**positions, **end}
            return stream_offset(ends, checksums_before(client, self.options, ends, start))

    def _present(self, positions: StreamOffset, layout: TopicLayout) -> StreamOffset:
        """``positions`` of the partitions the topic still has. A checkpointed partition
        that is gone (partitions deleted, the topic created again with fewer) may have held
        messages not yet read: raises LurcherSparkError with ``failOnDataLoss`` (default), as
        Kafka's source does; without it, or when the ``partitions`` option no longer names
        it (one it names that is gone failed already, ``selected_partitions``), the partition
        is dropped from the offset (read from its first offset if it is created again, as
        partitions added later are)."""
        gone = sorted((p for p in positions if int(p) not in layout.ends), key=int)
        if gone and self.options.fail_on_data_loss and self.options.partitions is None:
            raise LurcherSparkError(
                f"lurcher read of stream {self.options.stream!r}, topic "
                f"{self.options.topic!r}: partitions {[int(p) for p in gone]} of the checkpoint "
                "are gone (deleted, or the topic created again with fewer), so messages not yet "
                "read there may have been missed; set failOnDataLoss=false to continue "
                "without them")
        return {p: offset for p, offset in positions.items() if p not in gone}

    def _rebased(self, begin: StreamOffset, latest: StreamOffset) -> StreamOffset:
        """``begin``, where a partition's offsets restarted (``went_back``), moved down to
        its new end. Raises LurcherSparkError instead with ``failOnDataLoss`` (default):
        the messages below the checkpoint's offset would otherwise be skipped silently."""
        back = went_back(begin, latest)
        if back and self.options.fail_on_data_loss:
            changes = ", ".join(f"partition {p} from {begin[p]} to {latest[p]}" for p in back)
            raise LurcherSparkError(
                f"lurcher read of stream {self.options.stream!r}, topic "
                f"{self.options.topic!r}: end offset went back ({changes}); the topic was "
                "purged or a partition created again, so messages may have been missed; "
                "set failOnDataLoss=false to continue from the new end")
        return {**begin, **{p: latest[p] for p in back}}

    def reportLatestOffset(self) -> StreamOffset:
        return end_offsets(self.options)[1]

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """Raises LurcherSparkError (``plan_stream``: the topic purged and refilled past the
        start offset, with ``failOnDataLoss``)."""
        first = offset_positions(start)
        ranges = {int(key): (first.get(key, 0), stop)
                  for key, stop in offset_positions(end).items() if stop > first.get(key, 0)}
        if not ranges:
            return []
        return plan_stream(self.options, ranges, offset_checksums(start), offset_checksums(end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, RowBounds(), partition)

    def commit(self, end: dict) -> None:
        """Progress lives in Spark's checkpoint. With ``commitConsumer`` (or
        ``commitConsumerGroup``) it is also stored in lurcher as that consumer's (group's)
        offsets, the last offset read per partition, for other tools to see; nothing reads
        them back. Raises LurcherSparkError when storing fails (the query stops; a restart
        resumes from the checkpoint)."""
        consumer = self.options.commit_consumer or self.options.commit_consumer_group
        if consumer is None:
            return
        ends = {int(p): offset for p, offset in offset_positions(end).items()}
        with connected(self.options.config, f"commit of progress to consumer {consumer!r}, "
                                            f"stream {self.options.stream!r}") as client:
            store_progress(client, self.options.stream, self.options.topic, consumer,
                           self.options.commit_consumer is None, ends)
