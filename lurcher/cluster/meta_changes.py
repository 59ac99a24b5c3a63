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

Restarts: the replica re-executes its committed log from the start, so ``MetaService``
persists, before recording a change's events, where it is (``<system.path>/cluster/meta-applied.json``: position of
the change among executed requests, changes accepted, store event count before it). On
start it skips what its store already holds and finishes a change cut short by a crash.
The mark is fsynced when the store is (``system.state.enforce_fsync``); without it a power
cut, which may lose the store's last records anyway, may also lose the mark.
Invariant: every node's store holds the same replicated events in the same order (the
root user a node creates at its first start is its own, outside the group). What a handler
does besides recording events (ending the sessions of a deleted user) happens on the node
that decided only; consumer-group join/leave (``NODE_LOCAL``) stay node-local membership.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import inspect
import json
import logging
import os
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Callable

import msgspec

from lurcher.cluster.host import NOOP, ClusterBusy
from lurcher.core.meta.events import AnyEvent, Event, PartitionsDeleted, StreamDeleted, \
    TopicDeleted
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


class MetaService:
    """The metadata group's replicated object: executes committed changes on this node."""

    def __init__(self, shard: Any, store: Any, path: Path) -> None:
        self.shard, self.store, self.path = shard, store, path
        self.calls = 0  # requests executed since the replica started
        self.accepted, self.skip_below, self.done_events = self._load()
        self.waiters: list[tuple[int, asyncio.Future]] = []
        self.on_applied: list[Callable[[], None]] = []  # told after each accepted change

    def _load(self) -> tuple[int, int, int]:
        """(changes accepted, first position to execute, events of it already stored)."""
        try:
            mark = json.loads(self.path.read_text())
        except FileNotFoundError:
            return 0, 0, 0
        stored = self.store.events_count - mark["events_before"]
        if stored >= mark["events"]:
            return mark["accepted"], mark["position"] + 1, 0
        return mark["accepted"] - 1, mark["position"], stored

    def _mark(self, position: int, events: int) -> None:
        mark = {"position": position, "accepted": self.accepted + 1, "events": events,
                "events_before": self.store.events_count}
        temporary = self.path.with_suffix(".tmp")
        with open(temporary, "w") as f:
            json.dump(mark, f)
            if self.store.enforce_fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(temporary, self.path)

    def apply(self, body: bytes) -> bytes:
        if body == NOOP:
            return b""  # a new primary's announcement: not a change, not counted
        position = self.calls
        self.calls += 1
        if position < self.skip_below:
            return b""  # already in the store before this start
        change = _change_decoder.decode(body)
        if change.base != self.accepted:
            return msgspec.msgpack.encode(Outcome(False, self.accepted))
        done, self.done_events = self.done_events, 0
        self._mark(position, len(change.events))
        token = CAPTURE.set(None)
        try:
            for event in change.events[done:]:
                self._record(event)
        finally:
            CAPTURE.reset(token)
        self.accepted += 1
        self._wake()
        for listener in self.on_applied:
            listener()
        return msgspec.msgpack.encode(Outcome(True, self.accepted))

    def _record(self, event: Event) -> None:
        try:
            if isinstance(event, DELETIONS):
                record_deletion(self.shard, event)
            else:
                self.store.record(event)
        except Exception:
            log.exception("committed metadata event %s could not be applied on this node; "
                          "its metadata now differs from the group's", type(event).__name__)

    def _wake(self) -> None:
        for target, future in [w for w in self.waiters if w[0] <= self.accepted]:
            if not future.done():
                future.set_result(None)
        self.waiters = [w for w in self.waiters if w[0] > self.accepted]

    async def reached(self, count: int, timeout_s: float) -> bool:
        """True once this node has applied ``count`` changes; False after ``timeout_s``."""
        if self.accepted >= count:
            return True
        if timeout_s <= 0:
            return False
        future = asyncio.get_running_loop().create_future()
        self.waiters.append((count, future))
        try:
            await asyncio.wait_for(future, timeout_s)
        except asyncio.TimeoutError:
            return False
        return True

    def snapshot(self) -> bytes:
        raise NotImplementedError("the metadata group takes no checkpoints (checkpoint_every=0)")

    def restore(self, state: bytes) -> None:
        raise NotImplementedError("the metadata group takes no checkpoints (checkpoint_every=0)")


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
