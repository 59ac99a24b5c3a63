"""Metadata changes through the metadata group: decided on one node, applied on every node.

A metadata-changing command (routing kind ``meta``: streams, topics, partitions, consumer
groups, users, tokens) runs its ordinary handler on the node that received it, against a
scratch copy of the metadata (``Capture``, installed for that task only through ``CAPTURE``,
so concurrent requests keep reading the real store). The events the handler records are
not applied; they travel as one ``Change(base, events)`` through ``ClusterNode.submit``,
which sends it to the primary of the metadata group (a follower needs no forwarding of its
own: the group's client protocol is the forwarding). Once committed, every node's
``MetaService.apply`` executes it in commit order and records its events in its own
metadata store (observers open partitions, deletions bury their directories first), so
every node serves reads of it. The client's reply is the handler's, sent once the change
is committed on a quorum and applied on this node.

Optimistic concurrency: ``base`` is the number of changes this node had applied when the
handler decided. A change whose base is not the group's current count was decided on stale
metadata and is refused (deterministically on every node); its submitter waits until it
has applied that count and decides again, until ``commit_timeout_s`` has passed.

Bounded failure: a change not committed within ``commit_timeout_s`` (the group lost its
quorum) fails with TASK_TIMEOUT (12001, 0.8's "task did not finish in time"); it may still
commit later, once a quorum is back (the usual ambiguity of a timed-out write).

Restarts: the replica executes its committed log again from its latest checkpoint. The
store already holds what was recorded before (it is persisted as each event is recorded),
so ``MetaService`` skips as many of the re-executed changes' events as the store holds past
the checkpoint (``extra``): each change is decided again with the same outcome, only the
events the store lacks are recorded (the rest of a change a crash cut short), nothing
twice. This needs one number kept beside the store, written once at the node's first
start on a worker thread (``<system.path>/cluster/meta-applied.json``): ``prefix``, the store
events that are not the group's (the root user a node creates at its first start), so that
the group's i-th event is the store's ``prefix + i``-th on every node.

Checkpoints: the group checkpoints every ``cluster.checkpoint_every_ops`` like the partition
groups (the replica's own machinery: its journal and memory keep a bounded log). The state
is ``MetaCheckpoint``: the next position, the changes accepted and the group's events they
recorded; the metadata itself is each node's persisted store. A replica that adopts a
checkpoint its store is behind of (a node down across checkpoints, given one by state
transfer; a power cut that lost the store's last records) copies the group's events it
lacks from a peer's store (``events_for``, by index past the peer's ``prefix``, any node
answers), records them in order, then carries out the changes after the checkpoint, which
wait meanwhile (``pending``). So the group's events are in every store in the same order
with the same bytes (each the one encoding the deciding node produced); only the prefix
differs between nodes. ``accepted`` (what this node's store holds) lags ``count`` during
such a fill.

Invariant: every node's store holds the same replicated events in the same order (the
root user a node creates at its first start is its own, outside the group). What a handler
does besides recording events happens on the node that decided only, except that every node
ends its sessions of a deleted or deactivated user or deleted token as it records the event
(the partition lifecycle observer); consumer-group join/leave (``NODE_LOCAL``) stay
node-local membership.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import inspect
import json
import logging
from collections import deque
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Awaitable, Callable

import msgspec

from lurcher.cluster.host import NOOP, ClusterBusy, wait_listed
from lurcher.cluster.journal_file import replace_whole
from lurcher.core.meta.events import AnyEvent, Event, PartitionsDeleted, StreamDeleted, \
    TopicDeleted
from lurcher.core.meta.store import MetaLogCorrupt
from lurcher.core.shard.tombstones import record_deletion
from lurcher.core.wire.commands import META
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

log = logging.getLogger(__name__)

DELETIONS = (StreamDeleted, TopicDeleted, PartitionsDeleted)
# ``meta`` commands that change only this node's runtime state (membership), no events
NODE_LOCAL = frozenset({"join_consumer_group", "leave_consumer_group"})

CAPTURE: ContextVar[Any] = ContextVar("meta_capture", default=None)


class Change(msgspec.Struct, array_like=True, frozen=True):
    base: int
    events: list[AnyEvent]


class Outcome(msgspec.Struct, array_like=True, frozen=True):
    accepted: bool
    count: int  # changes accepted once this one was executed


_change_decoder = msgspec.msgpack.Decoder(Change)
_outcome_decoder = msgspec.msgpack.Decoder(Outcome)


class Capture:
    """Stands in for the metadata store while a handler decides: a scratch copy of the
    state that ``record`` changes and remembers; nothing is written."""

    defers_effects = True
    is_replica = False

    def __init__(self, store: Any, base: int) -> None:
        self.store, self.base = store, base
        self.deciding = True  # False once the handler returned (see ``MetaView``)
        self.state = copy.deepcopy(store.state, {id(store.state.observers): []})
        self.events: list[Event] = []
        self.events_count = store.events_count

    def record(self, event: Event) -> None:
        self.state.apply(event)
        self.events.append(event)
        self.events_count += 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


class MetaView:
    """``shard.meta`` on a cluster node's shard 0: the task's ``Capture`` while a handler
    decides, else the real store. (A callback or task created while a handler decided
    inherits its context, so a finished ``Capture`` no longer answers.)"""

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        capture = CAPTURE.get()
        return getattr(capture if capture is not None and capture.deciding else self._store,
                       name)


class MetaCheckpoint(msgspec.Struct, array_like=True, frozen=True):
    """The metadata group's checkpoint state: where the group is, not the metadata."""
    calls: int  # position of the next request
    count: int  # changes accepted by the group so far
    events: int  # replicated events those changes recorded


class EventsAsk(msgspec.Struct, array_like=True, frozen=True):
    first: int  # index among the group's replicated events
    count: int


_checkpoint_decoder = msgspec.msgpack.Decoder(MetaCheckpoint)
_ask_decoder = msgspec.msgpack.Decoder(EventsAsk)
_bodies_decoder = msgspec.msgpack.Decoder(list[bytes])
_event_decoder = msgspec.msgpack.Decoder(AnyEvent)
FETCH_EVENTS = 500
RETRY_S = 0.2


class MetaService:
    """The metadata group's replicated object: carries out committed changes on this node
    in commit order. ``count`` is the group's count of accepted changes at the op being
    executed (the same on every replica); ``accepted`` the changes this node's store
    holds (``reached`` waits on it, partition ops wait for it)."""

    def __init__(self, shard: Any, store: Any, path: Path) -> None:
        self.shard, self.store, self.path = shard, store, path
        self.calls = 0  # position of the next request (restored from a checkpoint)
        self.count = 0  # changes the group accepted up to ``calls``
        self.events = 0  # the group's events those changes recorded
        self.accepted = 0
        self.prefix = self._load_prefix()
        self.extra = self.replicated  # stored events the replay has not reached yet
        self.pending: deque[Change] = deque()  # accepted while the store is being filled
        self.target: MetaCheckpoint | None = None  # a checkpoint the store is behind of
        self.runner: asyncio.Task | None = None
        self.fetch: Callable[[bytes], Awaitable[bytes]] | None = None  # set by metadata
        self.waiters: list[tuple[int, asyncio.Future]] = []
        self.on_applied: list[Callable[[], None]] = []  # told after each accepted change

    def _load_prefix(self) -> int | None:
        """The store events that are not the group's (None: first start, see ``open``)."""
        try:
            return int(json.loads(self.path.read_text())["prefix"])
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError):
            raise MetaLogCorrupt(
                f"{self.path} is not this version's record of where the replicated "
                f"metadata starts (a damaged file, or a cluster node's data from an earlier "
                f"lurcher, which cannot be upgraded in place: start the cluster on empty "
                f"data directories)") from None

    async def open(self) -> None:
        """At a node's first start: persist ``prefix`` (the store's events so far), on a
        worker thread."""
        if self.prefix is None:
            self.prefix, self.extra = self.store.events_count, 0
            await asyncio.get_running_loop().run_in_executor(
                None, _write_atomically, self.path, {"prefix": self.prefix})

    @property
    def replicated(self) -> int:
        """The group's events this node's store holds."""
        return self.store.events_count - (self.prefix or 0)

    def apply(self, body: bytes) -> bytes:
        if body == NOOP:
            return b""  # a new primary's announcement: not a change, not counted
        self.calls += 1
        change = _change_decoder.decode(body)
        if change.base != self.count:
            return msgspec.msgpack.encode(Outcome(False, self.count))
        self.count += 1
        self.events += len(change.events)
        if self.target is not None or self.pending:
            self.pending.append(change)
            self._run_soon()
        else:
            self._carry_out(change)
        return msgspec.msgpack.encode(Outcome(True, self.count))

    def _carry_out(self, change: Change) -> None:
        """Record the change's events the store does not hold yet (a re-executed change
        may be stored already, or in part when a crash cut it short)."""
        held = min(self.extra, len(change.events))
        self.extra -= held
        token = CAPTURE.set(None)
        try:
            for event in change.events[held:]:
                self._record(event)
        finally:
            CAPTURE.reset(token)
        self._accepted(self.accepted + 1)

    def _accepted(self, accepted: int) -> None:
        self.accepted = accepted
        self._wake()
        for listener in self.on_applied:
            listener()

    def _run_soon(self) -> None:
        if self.runner is None or self.runner.done():
            self.runner = asyncio.ensure_future(self._catch_up())

    async def _catch_up(self) -> None:
        """Fill the store up to a restored checkpoint, then carry out the changes after."""
        try:
            while self.target is not None:
                await self._fill()
            while self.pending and self.target is None:
                self._carry_out(self.pending.popleft())
        except Exception:
            log.exception("catching up with the metadata group failed on this node")

    def _record(self, event: Event) -> None:
        try:
            if isinstance(event, DELETIONS):
                record_deletion(self.shard, event, committed=True)
            else:
                self.store.record(event)
        except Exception:
            log.exception("committed metadata event %s could not be applied on this node; "
                          "its metadata now differs from the group's", type(event).__name__)

    def _wake(self) -> None:
        for target, future in [w for w in self.waiters if w[0] <= self.accepted]:
            if not future.done():
                future.set_result(None)
        self.waiters[:] = [w for w in self.waiters if w[0] > self.accepted]

    async def reached(self, count: int, timeout_s: float) -> bool:
        """True once this node has applied ``count`` changes; False after ``timeout_s``."""
        if self.accepted >= count:
            return True
        if timeout_s <= 0:
            return False
        return await wait_listed(self.waiters, count, timeout_s)

    # ---- checkpoints ------------------------------------------------------------------

    def snapshot(self) -> bytes:
        return msgspec.msgpack.encode(MetaCheckpoint(self.calls, self.count, self.events))

    def restore(self, state: bytes) -> None:
        """Adopt a checkpoint: the group's position and counts. The changes it covers are
        in the store (a restart: later stored events are skipped as the log above it is
        executed again), or are copied from a peer's store before any later change."""
        checkpoint = _checkpoint_decoder.decode(state)
        self.calls, self.count, self.events = checkpoint.calls, checkpoint.count, \
            checkpoint.events
        self.pending.clear()  # executed before the checkpoint: covered by it
        self.extra = max(0, self.replicated - checkpoint.events)
        if self.replicated >= checkpoint.events:
            self.target = None
            self._accepted(max(self.accepted, checkpoint.count))
        else:
            self.target = checkpoint
            self._run_soon()

    async def _fill(self) -> None:
        """Copy the group's events from ``replicated`` up to the target's from a peer and
        record them in order; then the store holds the target's changes."""
        log.warning("metadata: this node's store lacks the group's events %d..%d after a "
                    "checkpoint; copying them from another node", self.replicated,
                    self.target.events - 1)
        while self.target is not None and self.replicated < self.target.events:
            ask = EventsAsk(self.replicated, min(self.target.events - self.replicated,
                                                 FETCH_EVENTS))
            bodies = await self._fetch(ask)
            if self.target is None or self.replicated != ask.first:
                continue  # a newer checkpoint meanwhile: ask again from where we are
            token = CAPTURE.set(None)
            try:
                for body in bodies[:self.target.events - self.replicated]:
                    self._record(_event_decoder.decode(body))
            finally:
                CAPTURE.reset(token)
        if self.target is not None:
            count, self.target = self.target.count, None
            self._accepted(max(self.accepted, count))

    async def _fetch(self, ask: EventsAsk) -> list[bytes]:
        while True:
            try:
                bodies = _bodies_decoder.decode(await self.fetch(msgspec.msgpack.encode(ask)))
                if bodies:
                    return bodies
            except Exception as exc:  # noqa: BLE001 - no peer holds them yet: ask again
                log.info("metadata: fetching events %s failed (%s); retrying", ask, exc)
            await asyncio.sleep(RETRY_S)

    async def events_for(self, group: int, body: bytes) -> bytes:
        """A peer's ask for the group's events (any node answers from its store)."""
        ask = _ask_decoder.decode(body)
        if self.replicated < ask.first + ask.count:
            raise IggyError(ErrorCode.INVALID_OFFSET, "this node's store lacks them too")
        first = (self.prefix or 0) + ask.first
        return msgspec.msgpack.encode(self.store.history[first:first + ask.count])


def _write_atomically(path: Path, content: dict) -> None:
    """Blocking: ``content`` as JSON at ``path``, replaced atomically and fsynced."""
    replace_whole(path, json.dumps(content).encode())


class MetaChanges:
    """Runs metadata-changing handlers through the metadata group (see the module doc)."""

    def __init__(self, node: Any, group: int, service: MetaService,
                 commit_timeout_s: float) -> None:
        self.node, self.group, self.service = node, group, service
        self.timeout_s = commit_timeout_s
        self.lock = asyncio.Lock()

    def install(self, dispatcher: Any) -> None:
        """Route the dispatcher's metadata-changing commands through the group."""
        for code, route in list(dispatcher.table.items()):
            if route.routing == META and route.spec.name not in NODE_LOCAL:
                dispatcher.table[code] = dataclasses.replace(
                    route, handler=self.replicated(route.handler))

    def replicated(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        def run(shard: Any, session: Any, request: Any) -> Any:
            return self.run(handler, shard, session, request)
        return run

    async def run(self, handler: Callable[..., Any], shard: Any, session: Any,
                  request: Any) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        while True:
            async with self.lock:
                capture = Capture(self.service.store, self.service.accepted)
                result = await self._decide(capture, handler, shard, session, request)
                if not capture.events:
                    return result
                outcome = await self._commit(Change(capture.base, capture.events),
                                             deadline - loop.time())
            reached = await self.service.reached(outcome.count, deadline - loop.time())
            if outcome.accepted:
                if not reached:
                    log.warning("metadata change committed but not yet applied on this node")
                return result
            if not reached or loop.time() >= deadline:
                raise IggyError(ErrorCode.TASK_TIMEOUT,
                                f"metadata change decided on stale metadata for "
                                f"{self.timeout_s:g}s (concurrent changes on other nodes)")

    @staticmethod
    async def _decide(capture: Capture, handler: Callable[..., Any], shard: Any,
                      session: Any, request: Any) -> Any:
        token = CAPTURE.set(capture)
        try:
            result = handler(shard, session, request)
            return await result if inspect.isawaitable(result) else result
        finally:
            capture.deciding = False
            CAPTURE.reset(token)

    async def _commit(self, change: Change, timeout_s: float) -> Outcome:
        try:
            if timeout_s <= 0:
                raise asyncio.TimeoutError
            future = self.node.submit(self.group, msgspec.msgpack.encode(change))
            body = await asyncio.wait_for(future, timeout_s)
        except asyncio.TimeoutError:
            raise IggyError(ErrorCode.TASK_TIMEOUT,
                            f"metadata change not committed within {self.timeout_s:g}s: "
                            f"the metadata group has no quorum") from None
        except ClusterBusy as exc:
            raise IggyError(ErrorCode.TASK_TIMEOUT, f"metadata change not submitted: {exc}") \
                from None
        return _outcome_decoder.decode(body) if body else Outcome(True, 0)
