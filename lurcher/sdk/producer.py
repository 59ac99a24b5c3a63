"""``Producer``: sends payloads to one topic, directly or batched in the background.

Direct mode: ``send`` cuts its own payloads into batches of ``batch_length`` and sends each
before returning; nothing of one call is left behind for a later one. When a batch fails,
the rest of that call is not sent and the error carries a note saying how many of the
call's messages were sent. ``send`` checks that ``ids``/``headers`` match the payloads in
number before anything is sent or queued (ValueError). Background mode: ``send`` appends
to a pending list; a batch is handed to the sender task when ``batch_length`` messages are
pending or ``linger_time_s`` after the first pending message. At most ``max_in_flight``
batches wait for the sender, so the buffer is bounded: ``send`` awaits while it is full
(back-pressure). ``flush`` waits until everything handed over is sent; ``close`` flushes
(for at most ``timeout_s`` when given: past it the messages not sent are discarded and
IggyError TASK_TIMEOUT says how many), stops the sender (cancelled, so a sender stuck
reconnecting to a server that is down never holds ``close``, nor a cancelled ``close``,
back) and raises the first background failure, if any (it is also raised by the
next ``send``/``flush``). A background failure discards every message given to ``send``
before it and not yet sent (the batches queued behind the failed one and the pending
messages: a batch cut before the failure is never sent after it, so nothing is stored out
of order); the raised error carries a note with the number of messages not sent (the
failed batch, which may have been stored, included). Messages given afterwards are sent.

A failed batch is retried ``retries`` times, ``retry_interval_s`` apart, when the failure
is a lost connection (the client has already reconnected and retried once); command errors
(e.g. unknown topic) are not retried. A batch sent again carries the same message ids (each
message without one gets a random id when its batch is built, ``build_batch``), so a server
that deduplicates ids stores it once. Batches are built with ``MessageBatch.build``; an
``Encryptor`` encrypts each payload first.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from lurcher.core.wire.batch import MessageBatch
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.values.partitioning import Partitioning
from lurcher.sdk.api.base import Id
from lurcher.sdk.connection import is_connection_lost
from lurcher.sdk.encryption import Encryptor
from lurcher.sdk.messages import (
    HeadersArg,
    PayloadArg,
    build_batch,
    encode_header_block,
    to_partitioning,
)

SendMode = Literal["direct", "background"]


class _Pending:
    """Payloads (and optional ids / per-message headers) waiting to form a batch."""

    def __init__(self) -> None:
        self.payloads: list[bytes] = []
        self.ids: list[int] | None = None
        self.headers: list[Any] | None = None

    def __len__(self) -> int:
        return len(self.payloads)

    def add(self, payloads: list[bytes], ids: Sequence[int] | None,
            headers: list[Any] | None) -> None:
        n0 = len(self.payloads)
        self.payloads.extend(payloads)
        if ids is not None or self.ids is not None:
            added = list(ids) if ids is not None else [0] * len(payloads)
            self.ids = (self.ids or [0] * n0) + added
        if headers is not None or self.headers is not None:
            self.headers = (self.headers or [None] * n0) + (headers or [None] * len(payloads))

    def cut(self, n: int) -> MessageBatch:
        """The first ``n`` pending messages as a batch (removed from the list)."""
        def take(items: list | None) -> list | None:
            if items is None:
                return None
            head, items[:] = items[:n], items[n:]
            return head
        payloads = take(self.payloads)
        ids, headers = take(self.ids), take(self.headers)
        return build_batch(payloads, ids, headers)


class Producer:
    def __init__(self, client: Any, stream: Id, topic: Id, *,
                 partitioning: Partitioning | int | bytes | str | None = None,
                 batch_length: int = 1000, linger_time_s: float = 0.005,
                 max_in_flight: int = 4, send_mode: SendMode = "direct",
                 retries: int = 3, retry_interval_s: float = 1.0,
                 encryptor: Encryptor | None = None,
                 create_stream_if_missing: bool = False,
                 create_topic_if_missing: bool = False, topic_partitions: int = 1) -> None:
        if send_mode not in ("direct", "background"):
            raise ValueError(f"send_mode {send_mode!r}: expected 'direct' or 'background'")
        if batch_length < 1 or max_in_flight < 1:
            raise ValueError("batch_length and max_in_flight must be >= 1")
        self.client = client
        self.stream, self.topic = stream, topic
        self.partitioning = to_partitioning(partitioning)
        self.batch_length = batch_length
        self.linger_time_s = linger_time_s
        self.send_mode = send_mode
        self.retries, self.retry_interval_s = retries, retry_interval_s
        self.encryptor = encryptor
        self._create = (create_stream_if_missing, create_topic_if_missing, topic_partitions)
        self._pending = _Pending()
        # (failures when cut, batch); a batch cut before the latest failure is discarded
        self._queue: asyncio.Queue[tuple[int, MessageBatch]] = asyncio.Queue(max_in_flight)
        self._failures = 0
        self._accepted = 0  # messages given to send (background mode)
        self._reported = 0  # of them, not sent and already counted in a raised error
        self._sender: asyncio.Task[None] | None = None
        self._handover = asyncio.Lock()
        self._linger: asyncio.Task[None] | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._initialised = False
        self.sent_messages = 0

    async def init(self) -> "Producer":
        """Create the stream/topic when asked to and they are missing; start the sender.

        Called by the first ``send``; raises IggyError."""
        if self._initialised:
            return self
        make_stream, make_topic, partitions = self._create
        if make_stream and await self.client.get_stream(self.stream) is None:
            await _tolerate_exists(self.client.create_stream(str(self.stream)))
        if make_topic and await self.client.get_topic(self.stream, self.topic) is None:
            await _tolerate_exists(
                self.client.create_topic(self.stream, str(self.topic), partitions))
        if self.send_mode == "background":
            self._sender = asyncio.get_running_loop().create_task(self._send_loop())
        self._initialised = True
        return self

    async def __aenter__(self) -> "Producer":
        return await self.init()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- sending ----------------------------------------------------------------------------

    async def send(self, payloads: Sequence[PayloadArg], *, ids: Sequence[int] | None = None,
                   headers: HeadersArg | Sequence[HeadersArg | None] | None = None) -> None:
        """Send (direct) or enqueue (background) ``payloads``. Raises IggyError
        (PRODUCER_CLOSED after close, or an earlier background failure), ValueError when
        ``ids``/``headers`` do not match ``payloads`` in number (nothing sent)."""
        self._check_open()
        await self.init()
        data = [p.encode() if isinstance(p, str) else p for p in payloads]
        if self.encryptor is not None:
            data = [self.encryptor.encrypt(p) for p in data]
        per_message = None
        if isinstance(headers, Mapping):
            per_message = [encode_header_block(headers)] * len(data)
        elif headers is not None:
            per_message = list(headers)
        _check_counts(len(data), ids, per_message)
        if self.send_mode == "direct":
            await self._send_now(data, ids, per_message)
        else:
            self._pending.add(data, ids, per_message)
            self._accepted += len(data)
            await self._hand_over_full_batches()

    async def _send_now(self, payloads: list[bytes], ids: Sequence[int] | None,
                        headers: list[Any] | None) -> None:
        """Direct mode: send this call's messages in order; on a failure the rest of them
        are dropped (never sent by a later call) and the error notes how many were sent."""
        own = _Pending()
        own.add(payloads, ids, headers)
        sent = 0
        while len(own):
            batch = own.cut(self.batch_length)
            try:
                await self._send_batch(batch)
            except Exception as e:
                e.add_note(f"producer: {sent} of the {len(payloads)} messages of this send "
                           f"were sent, the other {len(payloads) - sent} were not")
                raise
            sent += batch.count

    async def _hand_over_full_batches(self) -> None:
        while len(self._pending) >= self.batch_length:
            await self._put(self.batch_length)
        if len(self._pending) and self._linger is None:
            self._linger = asyncio.get_running_loop().create_task(self._linger_then_send())

    async def _linger_then_send(self) -> None:
        try:
            while len(self._pending):
                await asyncio.sleep(self.linger_time_s)
                await self._put(self.batch_length)
        finally:
            self._linger = None

    async def _put(self, max_messages: int) -> None:
        """Cut up to ``max_messages`` pending messages and queue them (waits while the queue
        is full). Cut and put happen under one FIFO lock, so batches queue in send order."""
        async with self._handover:
            if len(self._pending):
                batch = self._pending.cut(min(max_messages, len(self._pending)))
                await self._queue.put((self._failures, batch))

    async def _send_loop(self) -> None:
        while True:
            cut_after, batch = await self._queue.get()
            try:
                if cut_after == self._failures:
                    await self._send_batch(batch)
            except Exception as e:  # kept and raised to the caller of send/flush/close
                self._failures += 1
                self._pending = _Pending()
                self._error = self._error or e
            finally:
                self._queue.task_done()

    async def _send_batch(self, batch: MessageBatch) -> None:
        attempt = 0
        while True:
            try:
                await self.client.send_messages(self.stream, self.topic, batch, self.partitioning)
                self.sent_messages += batch.count
                return
            except IggyError as e:
                attempt += 1
                if not is_connection_lost(e) or attempt > self.retries:
                    raise
                await asyncio.sleep(self.retry_interval_s)

    # -- flush / close ----------------------------------------------------------------------

    async def flush(self) -> None:
        """Send everything pending and wait for it. Raises the first background failure."""
        self._raise_error()
        if self.send_mode == "direct":  # every direct send completes before returning
            return
        while len(self._pending):
            await self._put(self.batch_length)
        if self._linger is not None:
            await self._linger
        await self._queue.join()
        self._raise_error()

    async def close(self, timeout_s: float | None = None) -> None:
        """Flush (for at most ``timeout_s``; None: as long as the client retries), then stop
        the sender. Idempotent. Raises the first background failure, or IggyError
        TASK_TIMEOUT when the flush did not end in time (what was not sent is discarded)."""
        if self._closed:
            return
        try:
            if self._initialised:
                await asyncio.wait_for(self.flush(), timeout_s)
        except asyncio.TimeoutError:
            self._error = IggyError(ErrorCode.TASK_TIMEOUT,
                                    f"producer close: not flushed within {timeout_s}s")
            self._raise_error()
        finally:
            self._closed = True
            await self._stop_tasks()

    async def _stop_tasks(self) -> None:
        """Cancel the sender and the linger task (a request under way drops its
        connection) and wait for them."""
        tasks = [t for t in (self._sender, self._linger) if t is not None]
        self._sender = self._linger = None
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _check_open(self) -> None:
        if self._closed:
            raise IggyError(ErrorCode.PRODUCER_CLOSED, "producer is closed")
        self._raise_error()

    def _raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            unsent = self._accepted - self.sent_messages - self._reported
            self._reported += unsent
            error.add_note(f"producer: {unsent} of the messages given to send were not sent "
                           "(discarded; a batch under way at the failure may be stored)")
            raise error


def _check_counts(count: int, ids: Sequence[int] | None, headers: list[Any] | None) -> None:
    """Raises ValueError when ``ids`` or per-message ``headers`` do not match ``count``."""
    for what, values in (("ids", ids), ("headers", headers)):
        if values is not None and len(values) != count:
            raise ValueError(f"{what}: {len(values)} values for {count} payloads")


async def _tolerate_exists(coro: Any) -> None:
    """Await a create call; a concurrent creator winning the race is fine."""
    try:
        await coro
    except IggyError as e:
        if e.code not in (ErrorCode.STREAM_NAME_ALREADY_EXISTS,
                          ErrorCode.TOPIC_NAME_ALREADY_EXISTS):
            raise
