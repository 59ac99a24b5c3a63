"""A node of a lurcher cluster: replication groups driven over real links, files and time.

``ClusterNode`` is the I/O shell around the sans-IO ``core.replication.Replica``: it ticks
every replica each ``tick_ms``, hands it what the links deliver, sends what it asks to send
(``Links``), carries out its storage intents on a ``FileJournal`` (one worker thread per
group, so intents complete in the order issued and the event loop never waits for the
disk) and feeds the completions back.

Clients: ``submit(group, body)`` runs ``body`` through the group and returns the result once
it is committed and executed. A primary prepares the requests it received at the end of the
event-loop turn (``Replica.flush``), all of them in one Prepare, rather than at its next
tick. The node keeps a small pool of client ids (its index in the
low byte, so a primary on another node can route the ``Reply`` back); each id has at most
one request outstanding (as VR requires), resent to the primary of the replica's current
view every ``retransmit_ticks`` until answered; the client table executes a resent request
once. Waiting submissions are bounded (``MAX_WAITING``); beyond it ``submit`` raises
``ClusterBusy``.

Groups and members: ``services`` maps each group this node runs to its members (node
indices, in the group's own order) and its service factory. A group's replica ``i`` is node
``members[i]``: the replica core numbers its replicas 0..k-1 and makes replica ``view % k``
primary, so rotating ``members`` is how a group chooses which node is primary in view 0
(``partition_groups`` spreads the partition groups' primaries this way). A node runs only
the groups it is a member of; ``primary_node(group)`` and ``leader`` answer in node indices.

Taking primaries back: in the ``rebalanced`` groups (the partition groups; not the
metadata group, whose primary is the Leader clients follow), ``_maybe_take_back`` (see
there), after ``rebalance_after_ticks``.

Senders: the replica core believes a message's ``replica`` field (quorums count it), so a
message is handed to it only when that field names the node whose authenticated link
delivered it (a Request: a client id of that node); others are dropped (``_speaks_for``),
so a faulty or compromised node cannot vote as another member nor answer for its clients.

Forwarding: frames on group ``FORWARD_GROUP`` are not replication but node-to-node calls
(``forwarding``); they are handed to ``on_forward`` untouched.

Observing (for ``cluster.status`` and the metrics): after every step of a replica the shell
compares its status and view with what it saw before, logs each view change at INFO (group,
new view, new primary) and counts it; it notes the highest commit number the primary has
announced (Prepare, Commit) to tell a backup's lag, and times each submission from
``submit`` to its committed result (``commit_times``). The replica itself stays free of I/O.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lurcher.cluster.config import ClusterConfig
from lurcher.cluster.journal_file import Completion, FileJournal
from lurcher.cluster.links import Links, TlsPair
from lurcher.cluster.status import LatencyTally
from lurcher.core.replication.codec import encode_parts
from lurcher.core.replication.journal import Format, encode_record
from lurcher.core.replication.messages import Commit, Message, Prepare, Reply, Request
from lurcher.core.replication.replica import Config, Effects, Replica, Service, Status

log = logging.getLogger(__name__)

CLIENTS_PER_NODE = 16
MAX_WAITING = 10_000
MAX_PREPARE_BYTES = 16 * 1024 * 1024  # request bodies per Prepare (one larger goes alone)
# Memory of a group's replica (request bodies held in its log): the primary stops preparing
# while PIPELINE_BYTES are uncommitted (requests wait in its queue: back-pressure on the
# senders, whose submissions are bounded by the client slots and ``MAX_WAITING``); a
# checkpoint is taken once CHECKPOINT_BYTES were executed since the last one (or every
# ``checkpoint_every_ops`` ops), and at most KEEP_BELOW_BYTES of the ops below it are kept.
PIPELINE_BYTES = 32 * 1024 * 1024
CHECKPOINT_BYTES = 32 * 1024 * 1024
KEEP_BELOW_BYTES = 16 * 1024 * 1024
MAX_LOG_BYTES = PIPELINE_BYTES + CHECKPOINT_BYTES + KEEP_BELOW_BYTES + 2 * MAX_PREPARE_BYTES
"""The most request bytes a partition group's replica holds in memory (and the most a
log-carrying message, a view change's or a state transfer's, carries), when no single send
exceeds ``MAX_PREPARE_BYTES``."""
MAX_FRAME_BYTES = 2 * MAX_LOG_BYTES + 32 * 1024 * 1024
"""The largest link frame a node accepts from an authenticated peer: a log-carrying message
(``MAX_LOG_BYTES``, passed by up to three single sends larger than a Prepare), its
checkpoint's state (deduplication windows, ops waiting for metadata) and the metadata
group's log. Larger is refused and the link closed (``core.replication.link``)."""
NOOP = b""  # the empty request a new primary announces itself with (``_announce``)
FORWARD_GROUP = 0xFFFF_FFFF  # link frames of node-to-node calls, not of a group


async def wait_listed(waiters: list[tuple[Any, asyncio.Future]], condition: Any,
                      timeout_s: float) -> bool:
    """Wait, listed in ``waiters`` as ``(condition, future)``, until whoever wakes them sets
    the future: True; False after ``timeout_s``. The entry leaves ``waiters`` however the
    wait ends (timed out, or its caller gone), so waits that keep timing out (reads on a
    node that stays behind) never pile up. ``waiters`` is changed in place only."""
    waiter = (condition, asyncio.get_running_loop().create_future())
    waiters.append(waiter)
    try:
        await asyncio.wait_for(waiter[1], timeout_s)
    except asyncio.TimeoutError:
        return False
    finally:
        if waiter in waiters:
            waiters.remove(waiter)
    return True


class ClusterBusy(Exception):
    """Too many submissions wait for a client slot."""


@dataclass
class _Slot:
    client: int
    request: int = 0
    body: bytes = b""
    future: asyncio.Future | None = None
    sent_at: int = -1


@dataclass
class _Group:
    replica: Replica
    members: list[int]  # node index of each replica index
    journal: FileJournal
    executor: ThreadPoolExecutor
    slots: list[_Slot]
    waiting: deque = field(default_factory=deque)
    view: int = -1  # the view last seen in normal operation (-1: none yet)
    status: Status = Status.LOADING  # the replica's status after its last step
    view_changes: int = 0  # views this node saw its replica move to after its first one
    primary_commit: int = 0  # the highest commit number announced by a primary
    caught_up_since: int | None = None  # tick since this preferred backup is caught up
    flush_due: bool = False  # a flush of the replica's waiting requests is scheduled
    commit_times: LatencyTally = field(default_factory=LatencyTally)


class ClusterNode:
    def __init__(self, config: ClusterConfig, data_dir: Path,
                 services: dict[int, Callable[[], Service]
                                | tuple[list[int], Callable[[], Service]]],
                 new_cluster: bool = True, rebalanced: frozenset[int] = frozenset(),
                 checkpointed: frozenset[int] = frozenset(),
                 page_cache: frozenset[int] = frozenset(),
                 announced: frozenset[int] = frozenset(),
                 tls: TlsPair | None = None) -> None:
        """``services``: per group its service factory (every node a member, in index
        order) or (members, factory). ``rebalanced``: the groups whose view-0 primary takes
        the group back once caught up (``_maybe_take_back``); ``checkpointed``: the groups
        that take a checkpoint every ``checkpoint_every_ops`` ops; ``page_cache``: the groups
        whose journal is not fsynced (``FileJournal``'s ``fsync``); ``announced``: the groups
        whose service executes ``NOOP`` as nothing (``_announce``). ``new_cluster``: a
        missing journal is created
        formatted (the node joins a new cluster); False for a node whose disk was lost: it
        recovers from its peers. ``tls``: the links' mutual-TLS contexts (``Links``)."""
        self.config = config
        self.new_cluster = new_cluster
        self.rebalanced, self.checkpointed = rebalanced, checkpointed
        self.page_cache, self.announced = page_cache, announced
        self.index, self.n = config.index, len(config.names)
        self.data_dir = data_dir
        self.services = services
        self.groups: dict[int, _Group] = {}
        self.links = Links(config.name, config.secret.encode(), self.index,
                           {i: config.peer_address(i) for i in range(self.n) if i != self.index},
                           self._deliver, MAX_FRAME_BYTES, tls,
                           handshake_timeout_s=config.handshake_timeout_ms / 1000,
                           max_handshaking=config.max_handshaking_links)
        self.ticker: asyncio.Task | None = None
        self.on_executed: Callable[[int, int, bytes], None] | None = None
        self.on_forward: Callable[[int, Message], None] | None = None
        # whether a group's service is still catching up (a partition fill): not taken back
        self.catching_up: Callable[[int], bool] = lambda group: False
        self.misattributed: set[tuple[int, int]] = set()  # (peer, group) warned about

    def replica_config(self, replicas: int, group: int) -> Config:
        c = self.config
        every = c.checkpoint_every_ops if group in self.checkpointed else 0
        bounded = every > 0
        return Config(replicas=replicas, checkpoint_every=every, keep_below_checkpoint=every,
                      max_batch_bytes=MAX_PREPARE_BYTES,
                      pipeline_bytes=PIPELINE_BYTES,
                      checkpoint_bytes=CHECKPOINT_BYTES if bounded else 0,
                      keep_below_bytes=KEEP_BELOW_BYTES if bounded else 0,
                      heartbeat_ticks=c.heartbeat_ticks,
                      view_timeout_ticks=c.view_timeout_ticks,
                      view_change_timeout_ticks=c.view_change_timeout_ticks,
                      retransmit_ticks=c.retransmit_ticks, max_batch=64, pipeline=32)

    # ---- lifecycle ------------------------------------------------------------------

    async def start(self) -> None:
        current = self.config.node.current
        await self.links.start(current.ip, current.replication_port)
        nonce = int.from_bytes(os.urandom(5), "little") << 16
        for group, spec in sorted(self.services.items()):
            members, make_service = spec if isinstance(spec, tuple) else (
                list(range(self.n)), spec)
            if self.index not in members:
                continue
            replica = Replica(members.index(self.index), self.replica_config(len(members), group),
                              make_service(), nonce=int.from_bytes(os.urandom(7), "little"))
            first = encode_record(Format(len(members))) if self.new_cluster else None
            journal = FileJournal(self.data_dir / f"group-{group}.journal", first,
                                  fsync=group not in self.page_cache)
            slots = [_Slot(nonce | (i << 8) | self.index) for i in range(CLIENTS_PER_NODE)]
            self.groups[group] = _Group(replica, list(members), journal,
                                        ThreadPoolExecutor(1, f"journal-{group}"), slots)
            self._apply(group, replica.start())
        self.ticker = asyncio.create_task(self._tick_forever())

    async def close(self) -> None:
        if self.ticker is not None:
            self.ticker.cancel()
        await self.links.close()
        for g in self.groups.values():
            g.executor.shutdown(wait=True)
            g.journal.close()
            for slot in g.slots:
                if slot.future is not None and not slot.future.done():
                    slot.future.cancel()

    # ---- clients --------------------------------------------------------------------

    def submit(self, group: int, body: bytes) -> asyncio.Future:
        """A future of ``body``'s result once committed. Raises ClusterBusy, KeyError."""
        g = self.groups[group]
        if len(g.waiting) >= MAX_WAITING:
            raise ClusterBusy(f"{len(g.waiting)} submissions waiting for group {group}")
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        g.waiting.append((body, future))
        future.add_done_callback(g.commit_times.timer(loop.time))
        self._fill_slots(group)
        return future

    def _fill_slots(self, group: int) -> None:
        g = self.groups[group]
        for slot in g.slots:
            while g.waiting and g.waiting[0][1].done():
                g.waiting.popleft()  # its submitter gave up waiting
            if not g.waiting:
                return
            if slot.future is None:
                slot.body, slot.future = g.waiting.popleft()
                slot.request += 1
                self._send_request(group, slot)

    def _send_request(self, group: int, slot: _Slot) -> None:
        g = self.groups[group]
        slot.sent_at = g.replica.now
        request = Request(slot.client, slot.request, slot.body)
        primary = g.members[g.replica.primary_of(g.replica.view)]
        if primary == self.index:
            self._apply(group, g.replica.on_message(request))
            self._flush_soon(group, g)
        else:
            self.links.send(primary, group, request)

    def _resolve(self, group: int, reply: Reply) -> None:
        g = self.groups.get(group)
        slot = next((s for s in g.slots if s.client == reply.client), None) if g else None
        if slot is None or slot.future is None or reply.request != slot.request:
            return
        if not slot.future.done():
            slot.future.set_result(reply.result)
        slot.future = None
        self._fill_slots(group)

    # ---- driving the replica ----------------------------------------------------------

    async def _tick_forever(self) -> None:
        period = self.config.tick_ms / 1000
        while True:
            await asyncio.sleep(period)
            for group, g in self.groups.items():
                self._apply(group, g.replica.on_tick())
                self._resend(group)
                self._maybe_take_back(group, g)

    def _resend(self, group: int) -> None:
        g = self.groups[group]
        for slot in g.slots:
            due = slot.sent_at + self.config.retransmit_ticks
            if slot.future is not None and g.replica.now >= due:
                self._send_request(group, slot)

    def _maybe_take_back(self, group: int, g: _Group) -> None:
        """Become primary again of a group this node leads in view 0 (``members[0]``), once
        its replica has been in normal operation, caught up with the primary's announced
        commit, its service not catching up (``catching_up``: a partition fill under way)
        and linked to every member for ``rebalance_after_ticks``: a view change to the next
        view this node is primary of."""
        replica, wait = g.replica, self.config.rebalance_after_ticks
        if (not wait or group not in self.rebalanced or g.members[0] != self.index
                or replica.status is not Status.NORMAL
                or replica.is_primary or replica.commit < g.primary_commit
                or self.catching_up(group)
                or not all(self.link_up(m) for m in g.members)):
            g.caught_up_since = None
            return
        if g.caught_up_since is None:
            g.caught_up_since = replica.now
        elif replica.now - g.caught_up_since >= wait:
            k = len(g.members)
            view = (replica.view // k + 1) * k
            log.info("group %d: node %s is caught up and takes its primary back (view %d)",
                     group, self.config.names[self.index], view)
            g.caught_up_since = None
            self._apply(group, replica.request_view(view))

    def _deliver(self, peer: int, group: int, message: Message) -> None:
        if group == FORWARD_GROUP:
            if self.on_forward is not None:
                self.on_forward(peer, message)
            return
        g = self.groups.get(group)
        if g is None or not self._speaks_for(peer, group, g, message):
            return
        if isinstance(message, Reply):
            self._resolve(group, message)
        else:
            if isinstance(message, (Prepare, Commit)):
                g.primary_commit = max(g.primary_commit, message.commit)
            self._apply(group, g.replica.on_message(message))
            if isinstance(message, Request):
                self._flush_soon(group, g)

    def _speaks_for(self, peer: int, group: int, g: _Group, message: Message) -> bool:
        """Whether ``message`` came from the node it names: its sender (``replica``, a
        replica index of the group) is ``peer``, the node whose authenticated link
        delivered it, and a Request's client is one of ``peer``'s (low byte). Else it is
        dropped, with one warning per peer and group: a node may vote only as itself."""
        if isinstance(message, Request):
            named = message.client & 0xFF
        else:
            sender = getattr(message, "replica", None)
            named = peer if sender is None else (
                g.members[sender] if sender < len(g.members) else None)
        if named == peer and peer in g.members:
            return True
        if (peer, group) not in self.misattributed:
            self.misattributed.add((peer, group))
            log.warning("group %d: dropped a %s from node %d that names %s as its sender "
                        "(further such messages from it are dropped silently)", group,
                        type(message).__name__, peer,
                        "no member" if named is None else f"node {named}")
        return False

    def _flush_soon(self, group: int, g: _Group) -> None:
        """Have the replica prepare its waiting requests at the end of this loop turn, not
        at its next tick: one Prepare for whatever arrived meanwhile, without the wait."""
        if not g.flush_due:
            g.flush_due = True
            asyncio.get_running_loop().call_soon(self._flush, group, g)

    def _flush(self, group: int, g: _Group) -> None:
        g.flush_due = False
        if self.groups.get(group) is g:
            self._apply(group, g.replica.flush())

    def _apply(self, group: int, fx: Effects) -> None:
        g = self.groups[group]
        encoded: dict[int, list] = {}  # a message broadcast to several peers: encoded once
        for to, message in fx.sends:
            body = encoded.get(id(message))
            if body is None:
                body = encoded[id(message)] = encode_parts(message)
            self.links.send(g.members[to], group, message, body)
        for reply in fx.replies:
            owner = reply.client & 0xFF
            if owner == self.index:
                self._resolve(group, reply)
            else:
                self.links.send(owner, group, reply)
        if fx.storage:
            job = g.executor.submit(g.journal.execute, list(fx.storage))
            job.add_done_callback(self._completion_callback(group))
        if self.on_executed is not None:
            for op, _client, _request, result in fx.executed:
                self.on_executed(group, op, result)
        self._log_view(group, g)

    def _completion_callback(self, group: int) -> Callable:
        loop = asyncio.get_running_loop()

        def done(job) -> None:
            loop.call_soon_threadsafe(self._completed, group, job)
        return done

    def _completed(self, group: int, job) -> None:
        g = self.groups.get(group)
        if g is None:
            return
        try:
            completions: list[Completion] = job.result()
        except OSError as e:
            log.error("group %d journal failed: %s; this replica stops acknowledging", group, e)
            return
        replica = g.replica
        for kind, arg in completions:
            if kind == "written":
                self._apply(group, replica.on_written(arg))
            elif kind == "synced":
                self._apply(group, replica.on_synced(arg))
            else:
                records, start = arg
                self._apply(group, replica.on_loaded(records, start))

    def _log_view(self, group: int, g: _Group) -> None:
        """Log and count a view change, seen by comparing the replica with its last step."""
        replica, names = g.replica, [self.config.names[m] for m in g.members]
        status, g.status = g.status, replica.status
        if replica.status is Status.VIEW_CHANGE and status is not Status.VIEW_CHANGE:
            log.info("group %d: view change under way (to view %d) on node %s", group,
                     replica.view, names[replica.index])
        if replica.status is not Status.NORMAL or replica.view == g.view:
            return
        what = "started in" if g.view < 0 else "view change to"
        if g.view >= 0:
            g.view_changes += 1
        g.view = replica.view
        role = "primary" if replica.is_primary else "backup"
        log.info("group %d: %s view %d, primary %s (node %s is %s)", group, what,
                 replica.view, names[replica.primary_of(replica.view)], names[replica.index],
                 role)
        if replica.is_primary and replica.n > 1 and group in self.announced:
            asyncio.get_running_loop().call_soon(self._announce, group)

    def _announce(self, group: int) -> None:
        """A new primary runs one empty request (``NOOP``) through its group: the backups
        acknowledge it, so the primary knows their progress (lag) and they learn its commit
        number at once. Services execute ``NOOP`` as nothing, without counting it."""
        try:
            self.submit(group, NOOP).add_done_callback(lambda f: f.cancelled() or f.exception())
        except (ClusterBusy, KeyError):
            pass

    # ---- observing --------------------------------------------------------------------

    def leader(self, group: int) -> int | None:
        """The node whose replica is primary of ``group``'s current view, as this node
        sees it; None while this node's replica is not in normal operation."""
        g = self.groups[group]
        if g.replica.status is not Status.NORMAL:
            return None
        return g.members[g.replica.primary_of(g.replica.view)]

    def is_primary(self, group: int) -> bool:
        """This node's replica of ``group`` is the primary, in normal operation."""
        g = self.groups.get(group)
        return g is not None and g.replica.status is Status.NORMAL and g.replica.is_primary

    def members_of(self, group: int) -> list[int]:
        """``group``'s members (node indices), whether or not this node is one."""
        spec = self.services[group]
        return list(spec[0]) if isinstance(spec, tuple) else list(range(self.n))

    def link_up(self, index: int) -> bool:
        return index == self.index or index in self.links.outgoing

    def status(self, group: int) -> dict[str, object]:
        """``group``'s replica by indices (``cluster.status.group_status`` names nodes)."""
        g = self.groups[group]
        r = g.replica
        return {"node": self.index, "status": r.status.value, "view": r.view,
                "primary": g.members[r.primary_of(r.view)], "op": r.op, "commit": r.commit}
