"""Offset arithmetic of the data source: offset specs, per-partition ranges, trigger budgets.

Pure functions, no I/O. An offset range ``[start, end)`` of one Iggy partition is
half-open: ``end`` is the offset after the last message to read (a partition whose newest
message has offset ``n`` has end ``n + 1``; an empty partition has end 0).

Offset specs (options ``startingOffsets`` / ``endingOffsets``), as Kafka's source:
``"earliest"``, ``"latest"``, or a JSON object from partition id to an offset, where an
offset is a number, ``"earliest"``/``"latest"``, or Kafka's ``-2`` (earliest) / ``-1``
(latest). Partitions missing from the object take the default of the option. Ending
offsets are exclusive.

Timestamps (options ``startingTimestamp`` / ``endingTimestamp``): microseconds since the
Unix epoch, or an ISO-8601 date-time (UTC when it names no zone); a single value for every
partition or a JSON object per partition. Resolving one to an offset needs the server (see
``lurcher.spark.client.offset_at_timestamp``).

Streaming offsets (what Spark checkpoints) are ``{"<partition id>": next offset to read}``
and, under ``CHECKSUMS``, ``{"<partition id>": checksum of the message before that
offset}`` where one was stored (``stream_offset``; checkpoints written before it have no
checksums, and are read as before). Positions only move forward while a partition keeps
its offsets; ``went_back`` finds the partitions whose end fell below the checkpoint
(offsets restarted at 0), and a checksum that no longer matches finds a purge refilled past
it.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping

from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.units import U64_MAX, decimal, shown
from lurcher.spark.options import LurcherSparkError

EARLIEST = "earliest"
LATEST = "latest"
_KAFKA_CODES = {-2: EARLIEST, -1: LATEST}
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
ONE_US = dt.timedelta(microseconds=1)

Position = int | str  # an offset, EARLIEST or LATEST
StreamOffset = dict[str, int]  # partition id -> next offset to read (the positions)
CHECKSUMS = "checksums"  # a checkpointed offset's key for its checksums (module doc)


def stream_offset(positions: Mapping[str, int], checksums: Mapping[str, int]) -> dict:
    """The offset Spark checkpoints: ``positions`` and, when any, their ``checksums``."""
    return {**positions, CHECKSUMS: dict(checksums)} if checksums else dict(positions)


def offset_positions(offset: Mapping[str, object]) -> StreamOffset:
    """The positions of a checkpointed offset (its partition ids as keys)."""
    return {p: v for p, v in offset.items() if p != CHECKSUMS}  # type: ignore[misc]


def offset_checksums(offset: Mapping[str, object]) -> dict[str, int]:
    """The checksums of a checkpointed offset ({} for a checkpoint written before them)."""
    found = offset.get(CHECKSUMS)
    return dict(found) if isinstance(found, dict) else {}


def _position(option: str, value: object) -> Position:
    if isinstance(value, str) and value.lower() in (EARLIEST, LATEST):
        return value.lower()
    if isinstance(value, int) and not isinstance(value, bool):
        if value in _KAFKA_CODES:
            return _KAFKA_CODES[value]
        if 0 <= value <= U64_MAX:
            return value
    raise LurcherSparkError(f"lurcher option {option!r}: bad offset {shown(value)}")


def _integer_text(text: str) -> int | None:
    """``text`` as an int when it is ASCII digits (with an optional leading '-') short
    enough for a u64, else None."""
    negative = text.startswith("-")
    value = decimal(text[1:] if negative else text, U64_MAX)
    return -value if negative and value is not None else value


def _partition_map(option: str, text: str) -> dict[int, object]:
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as e:
        raise LurcherSparkError(f"lurcher option {option!r}: not JSON ({e})") from None
    if not isinstance(parsed, dict):
        raise LurcherSparkError(f"lurcher option {option!r}: expected a JSON object")
    keys = {key: Identifier.parse(key) for key in parsed}
    if not all(k.is_numeric for k in keys.values()):
        raise LurcherSparkError(f"lurcher option {option!r}: keys must be partition ids "
                                "(ASCII digits within u32)")
    return {keys[key].value: value for key, value in parsed.items()}


def parse_offsets(option: str, text: str | None, default: str) -> dict[int, Position] | Position:
    """A single position for all partitions, or a per-partition map (JSON object).

    Raises LurcherSparkError for anything else.
    """
    if text is None or not text.strip():
        return default
    stripped = text.strip()
    if not stripped.startswith("{"):
        number = _integer_text(stripped)
        return _position(option, stripped if number is None else number)
    return {p: _position(option, v) for p, v in _partition_map(option, stripped).items()}


def position_for(spec: dict[int, Position] | Position, partition_id: int,
                 default: str) -> Position:
    """The position ``spec`` gives ``partition_id`` (``default`` when it names no other)."""
    if isinstance(spec, dict):
        return spec.get(partition_id, default)
    return spec


def to_micros(option: str, value: object) -> int:
    """Microseconds since the epoch of a number or an ISO-8601 text (UTC if naive), not
    before the epoch (a poll by timestamp takes a u64).

    Raises LurcherSparkError.
    """
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= U64_MAX:
        return value
    if isinstance(value, str):
        text = value.strip()
        number = _integer_text(text)
        if number is not None and 0 <= number <= U64_MAX:
            return number
        try:
            moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            micros = datetime_micros(moment)
            if micros >= 0:
                return micros
    raise LurcherSparkError(f"lurcher option {option!r}: bad timestamp {shown(value)}")


def datetime_micros(moment: dt.datetime) -> int:
    """Microseconds since the epoch; a naive datetime is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return (moment - EPOCH) // ONE_US


def parse_timestamps(option: str, text: str | None) -> dict[int, int] | int | None:
    """None, one timestamp (µs) for all partitions, or a per-partition map. Raises
    LurcherSparkError."""
    if text is None or not text.strip():
        return None
    stripped = text.strip()
    if not stripped.startswith("{"):
        return to_micros(option, stripped)
    return {p: to_micros(option, v) for p, v in _partition_map(option, stripped).items()}


def timestamp_for(spec: dict[int, int] | int | None, partition_id: int) -> int | None:
    if isinstance(spec, dict):
        return spec.get(partition_id)
    return spec


def split_range(start: int, end: int, max_messages: int) -> list[tuple[int, int]]:
    """``[start, end)`` cut into consecutive pieces of at most ``max_messages``."""
    return [(s, min(s + max_messages, end)) for s in range(start, end, max_messages)]


def cap_offsets(start: Mapping[str, int], latest: Mapping[str, int],
                max_messages: int) -> StreamOffset:
    """End offsets that advance from ``start`` towards ``latest`` by at most
    ``max_messages`` in total, shared fairly between partitions (deterministic; every
    partition with data gets at least one message while budget remains). ``start`` must
    name every partition of ``latest``."""
    end = {p: max(latest[p], start[p]) for p in latest}
    available = {p: end[p] - start[p] for p in end}
    remaining = max_messages
    waiting = sorted((n, p) for p, n in available.items() if n > 0)
    for i, (n, p) in enumerate(waiting):
        share = -(-remaining // (len(waiting) - i))
        take = min(n, share, remaining)
        end[p] = start[p] + take
        remaining -= take
    return end


def went_back(start: Mapping[str, int], latest: Mapping[str, int]) -> list[str]:
    """Partitions of ``latest`` whose end is below the streaming offset ``start``: the
    partition restarted its offsets (topic purged, partition deleted and created again),
    so messages below ``start`` are new ones a read from ``start`` would never see.

    An end of 0 under a start of 1 is not counted: the server reports end 0 both for a
    partition that never held a message and for one whose only message (offset 0) was
    deleted by retention (``client.partition_end``), so it proves nothing.
    """
    return sorted((p for p in latest if p in start and latest[p] < start[p]
                   and not (latest[p] == 0 and start[p] == 1)), key=int)
