"""A node of a lurcher cluster: replication groups driven over real links, files and time.

``ClusterNode`` is the I/O shell around the sans-IO ``core.replication.Replica``: it ticks
every replica each ``tick_ms``, hands it what the links deliver, sends what it asks to send
(``Links``), carries out its storage intents on a ``FileJournal`` (one worker thread per
group, so intents complete in the order issued and the event loop never waits for the
disk) and feeds the completions back.

Clients: ``submit(group, body)`` runs ``body`` through the group and returns the result once
it is committed and executed. The node keeps a small pool of client ids (its index in the
low byte, so a primary on another node can route the ``Reply`` back); each id has at most
one request outstanding (as VR requires), resent to the primary of the replica's current
view every ``retransmit_ticks`` until answered; the client table executes a resent request
once. Waiting submissions are bounded (``MAX_WAITING``); beyond it ``submit`` raises
``ClusterBusy``.

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

from lurcher.cluster.config import ClusterConfig
from lurcher.cluster.journal_file import Completion, FileJournal
from lurcher.cluster.links import Links
from lurcher.cluster.status import LatencyTally
from lurcher.core.replication.journal import Format, encode_record
from lurcher.core.replication.messages import Commit, Message, Prepare, Reply, Request
from lurcher.core.replication.replica import Config, Effects, Replica, Service, Status

log = logging.getLogger(__name__)

CLIENTS_PER_NODE = 16
MAX_WAITING = 10_000


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
    journal: FileJournal
    executor: ThreadPoolExecutor
    slots: list[_Slot]
    waiting: deque = field(default_factory=deque)
    view: int = -1  # the view last seen in normal operation (-1: none yet)
    status: Status = Status.LOADING  # the replica's status after its last step
    view_changes: int = 0  # views this node saw its replica move to after its first one
    primary_commit: int = 0  # the highest commit number announced by a primary
    commit_times: LatencyTally = field(default_factory=LatencyTally)


class ClusterNode:
    def __init__(self, config: ClusterConfig, data_dir: Path,
                 services: dict[int, Callable[[], Service]], new_cluster: bool = True) -> None:
        """``new_cluster``: a missing journal is created formatted (the node joins a new
        cluster); False for a node whose disk was lost: it recovers from its peers."""
        self.config = config
        self.new_cluster = new_cluster
        self.index, self.n = config.index, len(config.names)
        self.data_dir = data_dir
        self.services = services
        self.groups: dict[int, _Group] = {}
        self.links = Links(config.name, config.secret.encode(), self.index,
                           {i: config.peer_address(i) for i in range(self.n) if i != self.index},
                           self._deliver)
        self.ticker: asyncio.Task | None = None
        self.on_executed: Callable[[int, int, bytes], None] | None = None

    def replica_config(self) -> Config:
        c = self.config
        return Config(replicas=self.n, heartbeat_ticks=c.heartbeat_ticks,
                      view_timeout_ticks=c.view_timeout_ticks,
                      view_change_timeout_ticks=c.view_change_timeout_ticks,
                      retransmit_ticks=c.retransmit_ticks, max_batch=64, pipeline=32)

    # ---- lifecycle ------------------------------------------------------------------

    async def start(self) -> None:
        current = self.config.node.current
        await self.links.start(current.ip, current.replication_port)
        nonce = int.from_bytes(os.urandom(5), "little") << 16
        for group, make_service in sorted(self.services.items()):
            replica = Replica(self.index, self.replica_config(), make_service(),
                              nonce=int.from_bytes(os.urandom(7), "little"))
            first = encode_record(Format(self.n)) if self.new_cluster else None
            journal = FileJournal(self.data_dir / f"group-{group}.journal", first)
            slots = [_Slot(nonce | (i << 8) | self.index) for i in range(CLIENTS_PER_NODE)]
            self.groups[group] = _Group(replica, journal,
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
        primary = g.replica.primary_of(g.replica.view)
        if primary == self.index:
            self._apply(group, g.replica.on_message(request))
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

    def _resend(self, group: int) -> None:
        g = self.groups[group]
        for slot in g.slots:
            due = slot.sent_at + self.config.retransmit_ticks
            if slot.future is not None and g.replica.now >= due:
                self._send_request(group, slot)

    def _deliver(self, peer: int, group: int, message: Message) -> None:
        g = self.groups.get(group)
        if g is None:
            return
        if isinstance(message, Reply):
            self._resolve(group, message)
        else:
            if isinstance(message, (Prepare, Commit)):
                g.primary_commit = max(g.primary_commit, message.commit)
            self._apply(group, g.replica.on_message(message))

    def _apply(self, group: int, fx: Effects) -> None:
        g = self.groups[group]
        for to, message in fx.sends:
            self.links.send(to, group, message)
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
        replica, names = g.replica, self.config.names
        status, g.status = g.status, replica.status
        if replica.status is Status.VIEW_CHANGE and status is not Status.VIEW_CHANGE:
            log.info("group %d: view change under way (to view %d) on node %s", group,
                     replica.view, names[self.index])
        if replica.status is not Status.NORMAL or replica.view == g.view:
            return
        what = "started in" if g.view < 0 else "view change to"
        if g.view >= 0:
            g.view_changes += 1
        g.view = replica.view
        role = "primary" if replica.is_primary else "backup"
        log.info("group %d: %s view %d, primary %s (node %s is %s)", group, what,
                 replica.view, names[replica.primary_of(replica.view)], names[self.index], role)

    # ---- observing --------------------------------------------------------------------

    def leader(self, group: int) -> int | None:
        """The node whose replica is primary of ``group``'s current view, as this node
        sees it; None while this node's replica is not in normal operation."""
        replica = self.groups[group].replica
        if replica.status is not Status.NORMAL:
            return None
        return replica.primary_of(replica.view)

    def link_up(self, index: int) -> bool:
        return index == self.index or index in self.links.outgoing

    def status(self, group: int) -> dict[str, object]:
        """``group``'s replica by indices (``cluster.status.group_status`` names nodes)."""
        r = self.groups[group].replica
        return {"node": self.index, "status": r.status.value, "view": r.view,
                "primary": r.primary_of(r.view), "op": r.op, "commit": r.commit}
