"""Storage: segments (.log + .index), partitions, recovery, consumer offsets, I/O backends."""

from lurcher.core.log.config import Clock, LogConfig, wall_clock_us
from lurcher.core.log.io import IoBackend, PosixIo
from lurcher.core.log.offsets import ConsumerOffsets, OffsetKind
from lurcher.core.log.partition import Partition, PollKind
from lurcher.core.log.recovery import RecoveryReport
from lurcher.core.log.segment import Segment, segment_file_name
from lurcher.core.log.slice import EMPTY, ByteRange, PolledSlice

__all__ = [
    "EMPTY", "ByteRange", "Clock", "ConsumerOffsets", "IoBackend", "LogConfig", "OffsetKind",
    "Partition", "PollKind", "PolledSlice", "PosixIo", "RecoveryReport", "Segment",
    "segment_file_name", "wall_clock_us",
]
