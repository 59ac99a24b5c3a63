"""``Consumer``: iterate messages of one topic, alone or as a member of a consumer group,
storing offsets according to an auto-commit mode.

    async with Consumer(client, "orders", "created", group="billing") as consumer:
        async for message in consumer:
            handle(message.payload)

Alone (``group=None``): polls as plain consumer ``consumer_id`` the given ``partition``
(or every partition of the topic, round-robin). The first poll of a partition uses
``strategy`` (default Next: continue after the stored offset); later polls ask for
``Offset(last consumed + 1)``. In a group: joins it on ``init`` (creating it when missing
and allowed); the server assigns partitions and polls use no partition id and Next, so
progress is the group's stored offset (``partition``, when given, restricts polls to that
one of the member's partitions). When a group poll returns messages this consumer
already handed out (stored offset behind, e.g. with ``interval`` or ``disabled`` commits),
those are skipped and the rest of that partition is asked for by offset.

Auto-commit modes (``store_consumer_offset`` of the last consumed offset per partition):
``"interval:<duration>"`` (default ``interval:1s``, in a background task), ``"each_message"``
(when the next message is requested), ``"each_batch"`` (before the next poll),
``"polling"`` (the server stores it when answering the poll: at most once), ``"disabled"``.
A message counts as consumed once the caller asks for the next one (its handler is done),
or at ``close``, but not when ``async with`` is left on an exception: the message being
handled then is not committed, and a consumer started again gets it again (at least once;
the interval task never commits the message being handled either). ``close`` commits
(unless disabled) and leaves the group; ``close(timeout_s)`` bounds that (a client facing a
server that is down reconnects for ever by default): past it IggyError TASK_TIMEOUT, and
the offsets not stored are read again by the next consumer.
A purge restarts a partition's offsets at 0: a poll answering a current offset below the
last one consumed there, or a commit refused as past the partition's end (INVALID_OFFSET),
makes the consumer forget that partition's progress and read it on with Next (from its
start, as the purge dropped the stored offsets), so the new messages are not skipped. Not
seen: a purge refilled past the last offset consumed before the consumer polls again.
Group membership belongs to the connection: after the client reconnects, the server answers
CONSUMER_GROUP_MEMBER_NOT_FOUND and the consumer joins again by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.responses.messages import Message, PolledMessages
from lurcher.core.wire.values.polling import PollingStrategy
from lurcher.sdk.api.base import Id
from lurcher.sdk.encryption import Encryptor
from lurcher.core.wire.units import parse_duration
from lurcher.sdk.messages import ReceivedMessage, to_strategy

log = logging.getLogger(__name__)

AUTO_COMMIT_MODES = ("interval", "each_message", "each_batch", "polling", "disabled")
# A group member's offset store on a partition it is no longer assigned: Iggy 0.8 and
# lurcher answer NOT_RESOLVED_CONSUMER, lurcher before it PARTITION_NOT_FOUND.
MOVED_PARTITION = frozenset({ErrorCode.NOT_RESOLVED_CONSUMER, ErrorCode.PARTITION_NOT_FOUND})
DEFAULT_COMMIT_INTERVAL_S = 1.0


def parse_auto_commit(text: str) -> tuple[str, float]:
    """``(mode, interval_s)``; ``"interval:<duration>"`` or a bare mode name.

    Raises ValueError for an unknown mode or a bad duration."""
    mode, _, arg = text.partition(":")
    if mode not in AUTO_COMMIT_MODES:
        raise ValueError(f"auto_commit {text!r}: expected one of {', '.join(AUTO_COMMIT_MODES)}")
    if mode == "interval":
        return mode, parse_duration(arg) if arg else DEFAULT_COMMIT_INTERVAL_S
    if arg:
        raise ValueError(f"auto_commit {text!r}: only 'interval' takes an argument")
    return mode, 0.0


class Consumer:
    def __init__(self, client: Any, stream: Id, topic: Id, group: Id | None = None, *,
                 consumer_id: int | str = 0, partition: int | None = None,
                 strategy: PollingStrategy | str | int | None = None, batch_length: int = 1000,
                 poll_interval_s: float = 0.1, auto_commit: str = "interval:1s",
                 create_group_if_missing: bool = True,
                 encryptor: Encryptor | None = None) -> None:
        """``poll_interval_s``: pause after a poll that returned nothing.
        Raises ValueError for a bad ``auto_commit``."""
        self.client = client
        self.stream, self.topic, self.group = stream, topic, group
        self.consumer_id = consumer_id
        self.partition = partition
        self.strategy = to_strategy(strategy)
        self.batch_length = batch_length
        self.poll_interval_s = poll_interval_s
        self.commit_mode, self.commit_interval_s = parse_auto_commit(auto_commit)
        self.create_group_if_missing = create_group_if_missing
        self.encryptor = encryptor
        self.consumed: dict[int, int] = {}
        self._in_hand: tuple[int, int] | None = None  # (partition, offset) last yielded
        self.stored: dict[int, int] = {}
        self._partitions: list[int] = []
        self._turn = 0
        self._batch: Iterator[Message] = iter(())
        self._batch_partition = 0
        self._committer: asyncio.Task[None] | None = None
        self._joined = False
        self._initialised = False
        self._closed = False
        self._stop = asyncio.Event()

    # -- life cycle -------------------------------------------------------------------------

    async def init(self) -> "Consumer":
        """Join the group (creating it if allowed) or find the partitions to read.

        Raises IggyError (e.g. TOPIC_ID_NOT_FOUND, CONSUMER_GROUP_ID_NOT_FOUND)."""
        if self._initialised:
            return self
        if self.group is not None:
            await self._join()
        elif self.partition is not None:
            self._partitions = [self.partition]
        else:
            topic = await self.client.get_topic(self.stream, self.topic)
            if topic is None:
                raise IggyError(ErrorCode.TOPIC_NAME_NOT_FOUND, f"{self.stream}/{self.topic}")
            self._partitions = [p.id for p in topic.partitions]
        if self.commit_mode == "interval":
            self._committer = asyncio.get_running_loop().create_task(self._commit_every())
        self._initialised = True
        return self

    async def _join(self) -> None:
        await join_group(self.client, self.stream, self.topic, self.group,
                         self.create_group_if_missing)
        self._joined = True

    async def close(self, timeout_s: float | None = None, *, handled: bool = True) -> None:
        """Commit the consumed offsets (unless auto-commit is disabled), leave the group,
        for at most ``timeout_s`` (None: as long as the client retries). Past it the
        interval committer is stopped and IggyError TASK_TIMEOUT raised (what was not
        committed is read again by the next consumer). ``handled=False`` (leaving
        ``async with`` on an exception): the last message yielded does not count as
        consumed. Idempotent."""
        if self._closed:
            return
        if handled:
            self._consume_in_hand()
        self._in_hand = None
        self._closed = True
        self._stop.set()
        try:
            await asyncio.wait_for(self._finish(), timeout_s)
        except asyncio.TimeoutError:
            raise IggyError(ErrorCode.TASK_TIMEOUT,
                            f"consumer close: offsets not committed within {timeout_s}s"
                            ) from None
        finally:
            await self._stop_committer()

    async def _stop_committer(self) -> None:
        """Cancel the interval committer if it is still running (a close that timed out or
        was cancelled) and wait for it."""
        committer, self._committer = self._committer, None
        if committer is not None and not committer.done():
            committer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await committer

    async def _finish(self) -> None:
        """The end of ``close``: the committer's last round, the final commit, leaving the
        group."""
        if self._committer is not None:
            await self._committer  # finishes an in-flight commit; cancelling it (only
            # past timeout_s) drops the connection, and with it the group membership
        if not self._initialised:
            return
        try:
            if self.commit_mode != "disabled":
                await self.commit()
        except Exception:  # not when cancelled past timeout_s: nothing more is awaited then
            await self._leave()
            raise
        await self._leave()

    async def _leave(self) -> None:
        """Leave the group, if this consumer joined it."""
        if not self._joined:
            return
        self._joined = False
        try:
            await self.client.leave_consumer_group(self.stream, self.topic, self.group)
        except IggyError as e:  # a reconnect already ended the membership
            if e.code != ErrorCode.CONSUMER_GROUP_MEMBER_NOT_FOUND:
                raise

    async def __aenter__(self) -> "Consumer":
        return await self.init()

    async def __aexit__(self, exc_type: object, *exc: object) -> None:
        await self.close(handled=exc_type is None)

    # -- offsets ----------------------------------------------------------------------------

    async def store_offset(self, partition_id: int, offset: int) -> None:
        """Store ``offset`` for ``partition_id`` now (this consumer or its group)."""
        consumer = self.group if self.group is not None else self.consumer_id
        await self._as_member(lambda: self.client.store_consumer_offset(
            consumer, self.stream, self.topic, offset, partition_id,
            group=self.group is not None))
        self.stored[partition_id] = offset

    async def _as_member(self, call: Any) -> Any:
        """``await call()``; in a group, a CONSUMER_GROUP_MEMBER_NOT_FOUND answer (the client
        reconnected, so the server forgot this member) joins again and retries once."""
        try:
            return await call()
        except IggyError as e:
            if self.group is None or e.code != ErrorCode.CONSUMER_GROUP_MEMBER_NOT_FOUND:
                raise
            await self.client.join_consumer_group(self.stream, self.topic, self.group)
            return await call()

    async def commit(self) -> None:
        """Store the last consumed offset of every partition where it moved. In a group, a
        partition the server no longer assigns to this member (``MOVED_PARTITION``, after a
        rebalance) is forgotten instead, and so is one whose offsets restarted below it
        (INVALID_OFFSET: purged). Raises IggyError."""
        for partition_id, offset in list(self.consumed.items()):
            if self.stored.get(partition_id) == offset:
                continue
            try:
                await self.store_offset(partition_id, offset)
            except IggyError as e:
                moved = self.group is not None and e.code in MOVED_PARTITION
                if not (moved or e.code == ErrorCode.INVALID_OFFSET):
                    raise
                self._forget(partition_id)

    def _forget(self, partition_id: int) -> None:
        """Drop what is known of this partition's progress (read it on with Next)."""
        self.consumed.pop(partition_id, None)
        self.stored.pop(partition_id, None)

    def _rewound(self, polled: PolledMessages) -> bool:
        """True (and the partition forgotten) when the poll's current offset is below the
        last offset consumed in its partition: it was purged, offsets restarted at 0."""
        last = self.consumed.get(polled.partition_id)
        if last is None or polled.current_offset >= last:
            return False
        self._forget(polled.partition_id)
        return True

    async def _commit_every(self) -> None:
        """Commit every ``commit_interval_s``; a failure is retried at the next tick and
        logged as a warning once per run of failures (the caller never sees it)."""
        failing = False
        while not self._stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.commit_interval_s)
                return
            try:
                await self.commit()
            except IggyError as e:
                if not failing:
                    log.warning("consumer of %s/%s: storing offsets failed, retried every "
                                "%ss: %s", self.stream, self.topic, self.commit_interval_s, e)
                failing = True
            else:
                failing = False

    # -- iteration --------------------------------------------------------------------------

    def __aiter__(self) -> "Consumer":
        return self

    async def __anext__(self) -> ReceivedMessage:
        """The next message; polls as needed. Raises StopAsyncIteration after ``close``."""
        await self.init()
        self._consume_in_hand()
        if self.commit_mode == "each_message" and self.consumed:
            await self.commit()
        while not self._closed:
            message = next(self._batch, None)
            if message is not None:
                return self._deliver(message)
            if self.commit_mode == "each_batch":
                await self.commit()
            polled = await self._poll()
            if polled.messages_count:
                self._start_batch(polled)
            else:
                await asyncio.sleep(self.poll_interval_s)
        raise StopAsyncIteration

    def _consume_in_hand(self) -> None:
        """The last message yielded was handled: count it as consumed."""
        if self._in_hand is not None:
            p, offset = self._in_hand
            self.consumed[p] = offset
            self._in_hand = None

    def _deliver(self, message: Message) -> ReceivedMessage:
        p = self._batch_partition
        self._in_hand = (p, message.offset)
        payload = None
        if self.encryptor is not None:
            payload = self.encryptor.decrypt(message.payload)
        return ReceivedMessage.of(p, message, payload)

    def _start_batch(self, polled: PolledMessages) -> None:
        p = polled.partition_id
        self._batch_partition = p
        last = self.consumed.get(p, -1)
        self._batch = (m for m in polled.messages() if m.offset > last)

    async def _poll(self) -> PolledMessages:
        if self.group is not None:
            return await self._poll_group()
        p = self._partitions[self._turn % len(self._partitions)]
        self._turn += 1
        last = self.consumed.get(p)
        strategy = self.strategy if last is None else PollingStrategy.offset(last + 1)
        polled = await self._poll_plain(p, strategy)
        if self._rewound(polled):
            polled = await self._poll_plain(p, PollingStrategy.next())
        return polled

    async def _poll_plain(self, p: int, strategy: PollingStrategy) -> PolledMessages:
        return await self.client.poll_messages(
            self.stream, self.topic, p, strategy, self.batch_length,
            self.commit_mode == "polling", consumer=self.consumer_id)

    async def _poll_group(self) -> PolledMessages:
        auto = self.commit_mode == "polling"
        polled = await self._as_member(lambda: self.client.poll_messages(
            self.stream, self.topic, self.partition, PollingStrategy.next(), self.batch_length,
            auto, consumer=self.group, group=True))
        if self._rewound(polled):
            return polled
        p, last = polled.partition_id, self.consumed.get(polled.partition_id)
        if polled.messages_count and last is not None and _first_offset(polled) <= last:
            polled = await self._as_member(lambda: self.client.poll_messages(
                self.stream, self.topic, p, PollingStrategy.offset(last + 1), self.batch_length,
                auto, consumer=self.group, group=True))
        return polled


def _first_offset(polled: PolledMessages) -> int:
    first = next(polled.messages(), None)
    return -1 if first is None else first.offset


async def join_group(client: Any, stream: Any, topic: Any, group: int | str,
                     create_if_missing: bool = True) -> None:
    """Join ``group``, creating it first when it is missing and named (not a numeric id).
    Raises IggyError (CONSUMER_GROUP_NAME_NOT_FOUND when missing and not created)."""
    if await client.get_consumer_group(stream, topic, group) is None:
        if not (create_if_missing and isinstance(group, str)):
            raise IggyError(ErrorCode.CONSUMER_GROUP_NAME_NOT_FOUND, str(group))
        try:
            await client.create_consumer_group(stream, topic, group)
        except IggyError as e:
            if e.code != ErrorCode.CONSUMER_GROUP_NAME_ALREADY_EXISTS:
                raise
    await client.join_consumer_group(stream, topic, group)
