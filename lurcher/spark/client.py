"""The data source's conversations with lurcher, through the SDK's ``SyncClient`` only.

``connected(config, what)`` opens a client for one task or planning step and turns every
SDK failure into ``LurcherSparkError`` naming what was being done and the Iggy error
(name and code). ``describe_topic`` answers names and per-partition end offsets;
``first_offset`` / ``offset_at_timestamp`` resolve ``earliest`` and timestamps;
``poll_range`` polls ``[start, end)`` of one partition in bounded chunks;
``store_progress`` stores a streaming read's progress as a consumer's offsets (of the
partitions the topic still has).

Invariant: ``poll_range`` asks for offsets strictly in order and never for more than
``end - next`` messages, so it yields each offset at most once and stops at ``end`` (or
earlier when the partition has nothing more, e.g. segments deleted by retention).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import msgspec

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.values.polling import PollingStrategy
from lurcher.sdk.config import ClientConfig
from lurcher.sdk.sync import SyncClient
from lurcher.spark.options import LurcherSparkError
from lurcher.spark.polled import PolledView


def failure(what: str, error: BaseException) -> LurcherSparkError:
    """A LurcherSparkError for ``error`` raised while doing ``what``."""
    if isinstance(error, IggyError):
        return LurcherSparkError(f"lurcher {what} failed: Iggy error {error}")
    return LurcherSparkError(f"lurcher {what} failed: {type(error).__name__}: {error}")


@contextlib.contextmanager
def connected(config: ClientConfig, what: str) -> Iterator[SyncClient]:
    """A connected, logged-in client, closed on exit. Raises LurcherSparkError for any
    IggyError or OSError (connect or inside the block)."""
    try:
        client = SyncClient(config=config)
    except (IggyError, OSError) as e:
        raise failure(f"{what}: connecting to {config.address}", e) from e
    try:
        yield client
    except (IggyError, OSError) as e:
        raise failure(what, e) from e
    finally:
        with contextlib.suppress(Exception):
            client.close()


class TopicLayout(msgspec.Struct, frozen=True):
    """Names as the server spells them and each partition's end offset (exclusive)."""

    stream: str
    topic: str
    ends: dict[int, int]


def partition_end(current_offset: int, messages_count: int) -> int:
    """The offset after a partition's newest message (0 when it never held one)."""
    return current_offset + 1 if (messages_count or current_offset) else 0


def _missing(kind: str, value: str) -> IggyError:
    numeric = Identifier.parse(value).is_numeric
    codes = {("stream", True): ErrorCode.STREAM_ID_NOT_FOUND,
             ("stream", False): ErrorCode.STREAM_NAME_NOT_FOUND,
             ("topic", True): ErrorCode.TOPIC_ID_NOT_FOUND,
             ("topic", False): ErrorCode.TOPIC_NAME_NOT_FOUND}
    return IggyError(codes[(kind, numeric)], f"{kind} {value!r}")


def describe_topic(client: SyncClient, stream: str, topic: str) -> TopicLayout:
    """Raises IggyError (STREAM_*/TOPIC_*_NOT_FOUND when either does not exist)."""
    stream_details = client.get_stream(stream)
    if stream_details is None:
        raise _missing("stream", stream)
    details = client.get_topic(stream, topic)
    if details is None:
        raise _missing("topic", topic)
    ends = {p.id: partition_end(p.current_offset, p.messages_count) for p in details.partitions}
    return TopicLayout(stream_details.header.name, details.header.name, ends)


def _first_polled_offset(client: SyncClient, stream: str, topic: str, partition_id: int,
                         strategy: PollingStrategy) -> int | None:
    polled = client.poll_messages(stream, topic, partition_id, strategy, 1)
    return next((m.offset for m in polled.messages()), None)


def first_offset(client: SyncClient, stream: str, topic: str, partition_id: int,
                 end: int) -> int:
    """The oldest offset still stored (``end`` when none). Raises IggyError."""
    found = _first_polled_offset(client, stream, topic, partition_id, PollingStrategy.first())
    return end if found is None else found


def offset_at_timestamp(client: SyncClient, stream: str, topic: str, partition_id: int,
                        timestamp_us: int, end: int) -> int:
    """The first offset whose timestamp is >= ``timestamp_us`` (``end`` when none).

    Raises IggyError.
    """
    found = _first_polled_offset(client, stream, topic, partition_id,
                                 PollingStrategy.timestamp(timestamp_us))
    return end if found is None else min(found, end)


def checksum_at(client: SyncClient, stream: str, topic: str, partition_id: int,
                offset: int) -> int | None:
    """The stored checksum of the message at ``offset`` (None when it is not stored): what
    a read planned now expects there, since a purge restarts offsets at 0 and new
    messages take old offsets. Raises IggyError."""
    polled = client.poll_messages(stream, topic, partition_id, PollingStrategy.offset(offset), 1)
    return next((m.checksum for m in polled.messages() if m.offset == offset), None)


def poll_range(client: SyncClient, stream: str, topic: str, partition_id: int, start: int,
               end: int, count: int) -> Iterator[PolledView]:
    """Polls of ``[start, end)``: each non-empty, at most ``count`` messages, none at or past
    ``end``. Raises IggyError, WireError for a malformed answer."""
    next_offset = start
    while next_offset < end:
        polled = client.poll_messages(stream, topic, partition_id,
                                      PollingStrategy.offset(next_offset),
                                      min(count, end - next_offset))
        view = PolledView.of(polled).below(end)
        if not view.count:
            return
        yield view
        next_offset = int(view.offsets[-1]) + 1


def _consumer_id(name: str) -> int | str:
    return Identifier.parse(name).value


def _group_id(client: SyncClient, stream: str, topic: str, group: str) -> int:
    """The id of consumer group ``group``: the group with that id when ``group`` is all
    digits and one exists (Iggy reads such a name as an id), else the group of that name,
    created when missing. Raises IggyError."""
    wanted = Identifier.parse(group)
    headers = client.get_consumer_groups(stream, topic)
    by_id = [g.id for g in headers if wanted.is_numeric and g.id == wanted.value]
    by_name = [g.id for g in headers if g.name == group]
    if by_id or by_name:
        return (by_id or by_name)[0]
    return client.create_consumer_group(stream, topic, group).header.id


def store_progress(client: SyncClient, stream: str, topic: str, consumer: str, group: bool,
                   ends: dict[int, int]) -> None:
    """Stores ``end - 1`` (the last offset read) of every partition with ``end > 0`` that
    the topic still has (a deleted one has nowhere to store it) as the offset of consumer
    ``consumer`` (a name or id), or of consumer group ``consumer`` when ``group``
    (``_group_id``: created when missing; joined by this client). Raises IggyError."""
    present = describe_topic(client, stream, topic).ends
    who = _group_id(client, stream, topic, consumer) if group else _consumer_id(consumer)
    if group:
        client.join_consumer_group(stream, topic, who)
    for partition_id, end in sorted(ends.items()):
        if end > 0 and partition_id in present:
            client.store_consumer_offset(who, stream, topic, end - 1, partition_id, group=group)
