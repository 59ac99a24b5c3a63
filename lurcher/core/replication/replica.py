"""One VR replica as a pure state machine (no sockets, clock, files or randomness).

Inputs: ``start()``, ``on_loaded(stored)``, ``on_message(msg)``, ``on_tick()``,
``on_written(pos)``, ``on_synced(upto)``, ``request_view(view)``, ``flush()``. Each returns
``Effects``: messages to send (``sends``, to a replica index), ``replies`` to clients,
``storage`` intents (``Write``, ``Sync``, ``Read``), and for observers the ``committed`` entries
and ``executed`` requests in execution order.

Invariants kept here (the simulator's auditor checks them from outside):
- the log is ``log[op - 1]``; a backup appends only ``op == len(log) + 1``, so an
  acknowledgement of op k in view v vouches for the whole view-v log up to k;
- every message that vouches for state (PrepareOk, DoViewChange, StartView, NewState,
  RecoveryResponse) leaves only after every journal record written before it is synced
  (``_send_durable``); the view number is journaled before a DoViewChange leaves; a
  journal read back at start counts as unsynced until a ``Sync`` of it completes (a crash
  may have left records readable that never reached the device);
- the primary counts itself only after its own write is synced, commits when ``quorum``
  replicas acknowledged, and executes committed ops in order, each client request at most
  once (client table, checked again at execution so duplicates in the log are harmless);
- a primary that restarts never resumes its old view (it may have lost prepares that
  backups hold); it starts a view change;
- checkpoints: the log holds ops ``base+1..op`` (``log[op - base - 1]``); every op up to
  ``base`` is covered by ``checkpoint`` (``base <= checkpoint.op <= executed``), taken at
  an executed (so committed) op. A checkpoint is sent to others and memory is trimmed only
  once its journal segment is synced; storage is told to ``Discard`` the older records
  only then. A replica that needs ops another one trimmed receives that replica's
  checkpoint with the log above it and restores it (state, client table, base).

``bugs`` plants deliberate mistakes (see ``Bug``) so tests can show the simulator finds them.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Protocol

from lurcher.core.replication.journal import (
    Append, Discard, Format, Read, Snapshot, StorageIntent, Sync, Truncate, ViewState, Write,
    decode_records, record_parts,
)
from lurcher.core.replication.messages import (
    Checkpoint, ClientSlot, Commit, DoViewChange, Entry, GetState, Message, NewState, Prepare,
    PrepareOk, Recovery, RecoveryResponse, Reply, Request, StartView, StartViewChange,
    entry_bytes,
)


class Status(enum.Enum):
    LOADING = "loading"
    NORMAL = "normal"
    VIEW_CHANGE = "view-change"
    RECOVERING = "recovering"


class Bug(enum.Enum):
    """Deliberate mistakes for the mutation check; a real replica has none."""

    QUORUM_F = "quorum-f"
    COMMIT_BEFORE_PREPARE_OK = "commit-before-prepare-ok"
    DVC_LOG_SELECTION = "dvc-log-selection"  # the new primary keeps its own log
    DVC_IGNORE_LOG_VIEW = "dvc-ignore-log-view"  # longest log, whatever its view
    PREPARE_OK_BEFORE_SYNC = "prepare-ok-before-sync"
    NO_CLIENT_TABLE = "no-client-table"
    CHECKPOINT_WITHOUT_TABLE = "checkpoint-without-table"  # sent checkpoints omit the table
    TRIM_BEFORE_SYNC = "trim-before-sync"  # discard old records before the checkpoint is durable


class Service(Protocol):
    def apply(self, body: bytes) -> bytes: ...

    def snapshot(self) -> bytes: ...

    def restore(self, state: bytes) -> None: ...


@dataclass(frozen=True)
class Config:
    replicas: int
    max_batch: int = 64
    max_batch_bytes: int = 0  # request bodies per Prepare (at least one request); 0: any
    pipeline: int = 8
    heartbeat_ticks: int = 4
    view_timeout_ticks: int = 30
    view_change_timeout_ticks: int = 40
    retransmit_ticks: int = 8
    checkpoint_every: int = 0  # take a checkpoint every N executed ops; 0: never trim
    keep_below_checkpoint: int = 0  # ops kept in memory below the latest checkpoint
    # Byte bounds of the in-memory log (request bodies; 0: none). Together they bound a
    # replica's log to about keep_below_bytes + checkpoint_bytes + pipeline_bytes plus two
    # requests (each bound may be passed by the one request that crosses it).
    pipeline_bytes: int = 0  # the primary prepares no more while this much is uncommitted
    checkpoint_bytes: int = 0  # also take a checkpoint once this much was executed since
    keep_below_bytes: int = 0  # at most this much of the ops below the checkpoint is kept


@dataclass
class Effects:
    sends: list[tuple[int, Message]] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)
    storage: list[StorageIntent] = field(default_factory=list)
    committed: list[Entry] = field(default_factory=list)
    executed: list[tuple[int, int, int, bytes]] = field(default_factory=list)
    restored: list[tuple[Checkpoint, bool]] = field(default_factory=list)  # (c, from a message)


class Replica:
    def __init__(self, index: int, config: Config, service: Service, nonce: int,
                 bugs: frozenset[Bug] = frozenset()) -> None:
        self.index, self.config, self.service, self.nonce, self.bugs = (
            index, config, service, nonce, bugs)
        self.n = config.replicas
        majority = self.n // 2 + 1  # f + 1 of 2f + 1; of an even count, more than half
        self.quorum = majority - 1 if Bug.QUORUM_F in bugs and majority > 1 else majority
        self.status = Status.LOADING
        self.view = self.log_view = self.commit = self.executed = self.now = 0
        self.log: list[Entry] = []
        self.base = 0
        self.checkpoint: Checkpoint | None = None
        self.checkpointing = False
        self.executed_bytes = 0  # request bytes executed since the last checkpoint began
        self.table: dict[int, tuple[int, bytes]] = {}
        self.wal_len = self.written = self.synced = 0
        self.sync_inflight = False
        self.outbox: deque[tuple[int, Callable[[], None]]] = deque()
        self._reset_roles()
        self.fx = Effects()

    def _reset_roles(self) -> None:
        self.acked: dict[int, int] = {}
        self.pending: list[Request] = []
        self.inflight: dict[int, int] = {}
        self.prepared_at: dict[int, int] = {}
        self.prepared_bytes: dict[int, int] = {}  # uncommitted op -> its request bytes
        self.last_heartbeat = self.last_heard = self.vc_started = self.now
        self.announcing = False
        self.svc: set[int] = set()
        self.dvcs: dict[int, DoViewChange] = {}
        self.dvc_sent = False
        self.recovery: dict[int, RecoveryResponse] = {}
        self.state_asked_at: int | None = None

    # ---- public inputs -------------------------------------------------------------

    def start(self) -> Effects:
        self.fx.storage.append(Read())
        return self._take()

    def on_loaded(self, stored: list[bytes], start: int = 0) -> Effects:
        records = decode_records(stored)
        # What was read back may never have reached the device (a process crash keeps the
        # page cache, a power loss would not): sync it before anything vouches for it.
        self.wal_len = self.written = start + len(records)
        self.synced = start
        if not any(isinstance(r, Format) for r in records):
            self.wal_len = self.written = self.synced = 0
            self.status = Status.RECOVERING
            self._broadcast(Recovery(self.nonce, self.index))
            return self._take()
        self._maybe_sync()
        self._replay(records)
        if self.view > self.log_view or (self.is_primary and self.n > 1):
            self._start_view_change(self.view + (self.view == self.log_view))
        else:
            self.status = Status.NORMAL
            if self.is_primary:
                self._become_primary_of(tuple(self.log), self.commit, self.checkpoint)
        return self._take()

    def on_message(self, msg: Message) -> Effects:
        self._HANDLERS[type(msg)](self, msg)
        return self._take()

    def on_tick(self) -> Effects:
        self.now += 1
        if self.status is Status.NORMAL:
            self._tick_primary() if self.is_primary else self._tick_backup()
        elif self.status is Status.VIEW_CHANGE:
            self._tick_view_change()
        elif (self.status is Status.RECOVERING and self.nonce >= 0
              and self.now % self.config.retransmit_ticks == 0):
            self._broadcast(Recovery(self.nonce, self.index))
        return self._take()

    def flush(self) -> Effects:
        """Prepare the requests waiting for the next tick now (the host calls it once per
        turn of its event loop, so requests that arrived together still share a Prepare)."""
        if self.status is Status.NORMAL and self.is_primary:
            self._flush()
        return self._take()

    def request_view(self, view: int) -> Effects:
        """Start a view change to ``view`` (the host moving the primary back to a preferred
        replica). Only from normal operation and towards a higher view; as safe as a view
        change started by a timeout, which any replica may start at any moment."""
        if self.status is Status.NORMAL and view > self.view:
            self._start_view_change(view)
        return self._take()

    def on_written(self, pos: int) -> Effects:
        self.written = max(self.written, pos + 1)
        self._maybe_sync()
        return self._take()

    def on_synced(self, upto: int) -> Effects:
        self.sync_inflight = False
        self.synced = max(self.synced, upto)
        while self.outbox and self.outbox[0][0] <= self.synced:
            self.outbox.popleft()[1]()
        self._maybe_sync()
        return self._take()

    # ---- helpers ------------------------------------------------------------------

    @property
    def op(self) -> int:
        return self.base + len(self.log)

    def entry(self, op: int) -> Entry:
        return self.log[op - self.base - 1]

    def primary_of(self, view: int) -> int:
        return view % self.n

    @property
    def is_primary(self) -> bool:
        return self.primary_of(self.view) == self.index

    def _take(self) -> Effects:
        fx, self.fx = self.fx, Effects()
        return fx

    def _broadcast(self, msg: Message) -> None:
        self.fx.sends.extend((r, msg) for r in range(self.n) if r != self.index)

    def _deliver(self, to: int, msg: Message) -> None:
        if to == self.index:
            self._HANDLERS[type(msg)](self, msg)
        else:
            self.fx.sends.append((to, msg))

    def _after_sync(self, action: Callable[[], None]) -> None:
        """Run ``action`` once every record journaled so far is durable."""
        if not self.outbox and self.synced >= self.wal_len:
            action()
        else:
            self.outbox.append((self.wal_len, action))

    def _send_durable(self, to: int, msg: Message) -> None:
        if Bug.PREPARE_OK_BEFORE_SYNC in self.bugs and isinstance(msg, PrepareOk):
            self._deliver(to, msg)
        else:
            self._after_sync(lambda: self._deliver(to, msg))

    def _journal(self, record: Append | Truncate | ViewState | Format | Snapshot) -> None:
        self.fx.storage.append(Write(self.wal_len, record_parts(record)))
        self.wal_len += 1

    def _maybe_sync(self) -> None:
        if not self.sync_inflight and self.written > self.synced:
            self.sync_inflight = True
            self.fx.storage.append(Sync(self.written))

    def _replay(self, records: list) -> None:
        for record in records:
            if isinstance(record, ViewState):
                self.view, self.log_view = record.view, record.log_view
            elif isinstance(record, Append):
                self._replay_append(record.entry)
            elif isinstance(record, Truncate):
                del self.log[max(0, record.op - self.base):]
            elif isinstance(record, Snapshot):
                self._restore(record.checkpoint, journal=False)
        if self.checkpoint is not None:
            self.fx.restored.append((self.checkpoint, False))

    def _replay_append(self, entry: Entry) -> None:
        """An op journaled again unchanged (a checkpoint segment restates the log above
        its checkpoint) keeps the ops after it: a crash that cut such a segment short must
        not drop ops the older records hold. A different entry replaces op and all after."""
        at = entry.op - 1 - self.base
        if 0 <= at < len(self.log) and self.log[at] == entry:
            return
        del self.log[max(0, at):]
        self.log.append(entry)

    def _append(self, entry: Entry) -> None:
        self.log.append(entry)
        self._journal(Append(entry))

    def _install(self, log: tuple[Entry, ...], checkpoint: Checkpoint | None = None,
                 after: int | None = None) -> bool:
        """Make ops ``after+1..`` equal ``log`` for the current view, journaling what differs.

        Ops up to ``after`` are committed: we keep our own if we committed that far, else
        we restore ``checkpoint`` (False, nothing changed, if there is none to restore)."""
        after = (checkpoint.op if checkpoint is not None else 0) if after is None else after
        if after > self.commit:
            if checkpoint is None or checkpoint.op != after:
                return False
            self._restore(checkpoint, journal=True)
        elif after + len(log) < self.base:
            return False
        start = max(after, self.base)
        incoming, ours = log[start - after:], self.log[start - self.base:]
        common, limit = 0, min(len(ours), len(incoming))
        while common < limit and (ours[common] is incoming[common]
                                  or ours[common] == incoming[common]):
            common += 1
        if common < len(ours):
            del self.log[start - self.base + common:]
            self._journal(Truncate(start + common))
        for entry in incoming[common:]:
            self._append(entry)
        self.log_view = self.view
        self._journal(ViewState(self.view, self.view))
        self.commit = min(self.commit, self.op)
        self.executed = min(self.executed, self.op)
        return True

    # ---- checkpoints --------------------------------------------------------------

    def _restore(self, checkpoint: Checkpoint, journal: bool) -> None:
        """Adopt ``checkpoint``: ops up to its op become its state; later ops stay."""
        keep = self.log[checkpoint.op - self.base:] if checkpoint.op < self.op else []
        self.log, self.base, self.checkpoint = keep, checkpoint.op, checkpoint
        self.service.restore(checkpoint.state)
        self.table = {s.client: (s.request, s.result) for s in checkpoint.table}
        self.commit = max(self.commit, checkpoint.op)
        self.executed = checkpoint.op
        if journal:
            self._journal(Snapshot(checkpoint))
            self.fx.restored.append((checkpoint, True))

    def _maybe_checkpoint(self) -> None:
        every, limit = self.config.checkpoint_every, self.config.checkpoint_bytes
        last = self.checkpoint.op if self.checkpoint is not None else 0
        if not every or self.checkpointing or (
                self.executed < last + every
                and not (limit and self.executed_bytes >= limit)):
            return
        self.executed_bytes = 0
        table = tuple(ClientSlot(c, r, result) for c, (r, result) in sorted(self.table.items()))
        checkpoint = Checkpoint(self.executed, self.service.snapshot(), table)
        segment = self.wal_len
        self.checkpointing = True
        self._journal(Format(self.n))
        self._journal(Snapshot(checkpoint))
        self._journal(ViewState(self.view, self.log_view))
        for entry in self.log[checkpoint.op - self.base:]:
            self._journal(Append(entry))
        if Bug.TRIM_BEFORE_SYNC in self.bugs:
            self._checkpoint_durable(checkpoint, segment)
        else:
            self._after_sync(lambda: self._checkpoint_durable(checkpoint, segment))

    def _checkpoint_durable(self, checkpoint: Checkpoint, segment: int) -> None:
        """The segment is synced: the checkpoint may be shared and older records dropped."""
        self.checkpointing = False
        if self.checkpoint is None or checkpoint.op > self.checkpoint.op:
            self.checkpoint = checkpoint
        trim_to = max(self.base, self.checkpoint.op - self.config.keep_below_checkpoint)
        if self.config.keep_below_bytes:
            sizes = [entry_bytes(e) for e in self.log[trim_to - self.base:
                                                      self.checkpoint.op - self.base]]
            kept = sum(sizes)
            for size in sizes:
                if kept <= self.config.keep_below_bytes:
                    break
                kept -= size
                trim_to += 1
        del self.log[:trim_to - self.base]
        self.base = trim_to
        self.fx.storage.append(Discard(segment))

    def _state_after(self, after: int) -> tuple[int, Checkpoint | None, tuple[Entry, ...]]:
        """Our log after op ``after``, or our checkpoint and the log above it if trimmed."""
        if after >= self.base:
            return after, None, tuple(self.log[after - self.base:])
        checkpoint = self.checkpoint
        assert checkpoint is not None
        if Bug.CHECKPOINT_WITHOUT_TABLE in self.bugs:
            checkpoint = Checkpoint(checkpoint.op, checkpoint.state, ())
        return checkpoint.op, checkpoint, tuple(self.log[checkpoint.op - self.base:])

    # ---- execution ----------------------------------------------------------------

    def _learn_commit(self, commit: int) -> None:
        target = min(commit, self.op)
        if target > self.commit:
            self.commit = target
            self._execute()
        if commit > self.op:
            self._request_state()

    def _execute(self) -> None:
        reply = self.status is Status.NORMAL and self.is_primary
        dedup = Bug.NO_CLIENT_TABLE not in self.bugs
        while self.executed < self.commit:
            entry = self.log[self.executed - self.base]
            self.executed += 1
            self.prepared_bytes.pop(entry.op, None)
            self.fx.committed.append(entry)
            for req in entry.requests:
                known = self.table.get(req.client)
                if dedup and known is not None and req.request <= known[0]:
                    continue
                self.executed_bytes += len(req.body)
                result = self.service.apply(req.body)
                self.table[req.client] = (req.request, result)
                self.fx.executed.append((entry.op, req.client, req.request, result))
                if self.inflight.get(req.client, -1) <= req.request:
                    self.inflight.pop(req.client, None)
                if reply:
                    self.fx.replies.append(Reply(self.view, req.client, req.request, result))
        self._maybe_checkpoint()

    # ---- normal operation: primary ------------------------------------------------

    def _on_request(self, req: Request) -> None:
        if self.status is not Status.NORMAL or not self.is_primary:
            return
        if Bug.NO_CLIENT_TABLE not in self.bugs:
            known = self.table.get(req.client)
            if known is not None and req.request <= known[0]:
                if req.request == known[0]:
                    self.fx.replies.append(Reply(self.view, req.client, req.request, known[1]))
                return
            if self.inflight.get(req.client, -1) >= req.request:
                return
        self.inflight[req.client] = req.request
        self.pending.append(req)
        if len(self.pending) >= self.config.max_batch:
            self._flush()

    def _flush(self) -> None:
        cfg = self.config
        while (self.pending and not self.announcing and self.op - self.commit < cfg.pipeline
               and not (cfg.pipeline_bytes
                        and sum(self.prepared_bytes.values()) >= cfg.pipeline_bytes)):
            take = self._batch_size()
            batch = tuple(self.pending[:take])
            del self.pending[:take]
            entry = Entry(self.view, self.op + 1, batch)
            self._append(entry)
            self.prepared_at[entry.op] = self.now
            self.prepared_bytes[entry.op] = entry_bytes(entry)
            self._broadcast(Prepare(self.view, self.commit, entry, self.index))
            self._send_durable(self.index, PrepareOk(self.view, entry.op, self.index))
            if Bug.COMMIT_BEFORE_PREPARE_OK in self.bugs:
                self.commit = entry.op
                self._execute()

    def _batch_size(self) -> int:
        """How many pending requests the next Prepare carries: at most ``max_batch``, and
        with ``max_batch_bytes`` no more bodies than fit in it (always at least one)."""
        cfg = self.config
        if not cfg.max_batch_bytes:
            return cfg.max_batch
        take, total = 0, 0
        for req in self.pending[:cfg.max_batch]:
            total += len(req.body)
            if take and total > cfg.max_batch_bytes:
                break
            take += 1
        return take

    def _on_prepare_ok(self, m: PrepareOk) -> None:
        if self.status is not Status.NORMAL or not self.is_primary or m.view != self.view:
            return
        self.acked[m.replica] = max(self.acked.get(m.replica, 0), m.op)
        if len(self.acked) < self.quorum:
            return
        candidate = sorted(self.acked.values(), reverse=True)[self.quorum - 1]
        if min(candidate, self.op) > self.commit:
            self.commit = min(candidate, self.op)
            self._execute()
            self._flush()

    def _tick_primary(self) -> None:
        self._flush()
        if self.now - self.last_heartbeat >= self.config.heartbeat_ticks:
            self.last_heartbeat = self.now
            self._broadcast(Commit(self.view, self.commit, self.index))
        for op in range(self.commit + 1, self.op + 1):
            if self.now - self.prepared_at.get(op, 0) >= self.config.retransmit_ticks:
                self.prepared_at[op] = self.now
                prepare = Prepare(self.view, self.commit, self.entry(op), self.index)
                for r in range(self.n):
                    if r != self.index and self.acked.get(r, 0) < op:
                        self.fx.sends.append((r, prepare))

    # ---- normal operation: backup -------------------------------------------------

    def _accept_view(self, view: int) -> bool:
        """True when a message from the primary of ``view`` may change our log."""
        if self.status in (Status.LOADING, Status.RECOVERING) or view < self.view:
            return False
        if self.primary_of(view) == self.index:
            return False
        if view > self.view or self.status is Status.VIEW_CHANGE:
            self.view = view
            self.status = Status.NORMAL
            self._reset_roles()
            self._journal(ViewState(self.view, self.log_view))
        self.last_heard = self.now
        if self.log_view != self.view:
            self._request_state()
            return False
        return True

    def _on_prepare(self, m: Prepare) -> None:
        if not self._accept_view(m.view):
            return
        entry = m.entry
        if entry.op == self.op + 1:
            self._append(entry)
        if entry.op <= self.op:
            self._send_durable(self.primary_of(self.view),
                               PrepareOk(self.view, self.op, self.index))
        else:
            self._request_state()
        self._learn_commit(m.commit)

    def _on_commit(self, m: Commit) -> None:
        if self._accept_view(m.view):
            self._learn_commit(m.commit)

    def _tick_backup(self) -> None:
        if self.now - self.last_heard >= self.config.view_timeout_ticks:
            self._start_view_change(self.view + 1)
        elif self.log_view != self.view:
            self._request_state()

    # ---- state transfer -----------------------------------------------------------

    def _request_state(self) -> None:
        asked = self.state_asked_at
        if asked is not None and self.now - asked < self.config.retransmit_ticks:
            return
        self.state_asked_at = self.now
        after = self.op if self.log_view == self.view else self.commit
        self.fx.sends.append((self.primary_of(self.view), GetState(self.view, after, self.index)))

    def _on_get_state(self, m: GetState) -> None:
        if (self.status is Status.NORMAL and m.view == self.view and self.log_view == self.view
                and m.op <= self.op):
            after, checkpoint, log = self._state_after(m.op)
            self._send_durable(m.replica, NewState(
                self.view, after, self.commit, log, self.index, checkpoint))

    def _on_new_state(self, m: NewState) -> None:
        if self.status is not Status.NORMAL or m.view != self.view or self.is_primary:
            return
        if m.checkpoint is not None and m.checkpoint.op != m.after:
            return
        if self.log_view != self.view:
            if not self._install(m.log, m.checkpoint, m.after):
                return
        else:
            if m.after > self.op:
                if m.checkpoint is None:
                    return
                self._restore(m.checkpoint, journal=True)
                self._journal(Truncate(self.op))
            for entry in m.log:
                if entry.op == self.op + 1:
                    self._append(entry)
        self.state_asked_at = None
        self.last_heard = self.now
        self._send_durable(self.primary_of(self.view), PrepareOk(self.view, self.op, self.index))
        self._learn_commit(m.commit)

    # ---- view change --------------------------------------------------------------

    def _start_view_change(self, view: int) -> None:
        self.view = view
        self.status = Status.VIEW_CHANGE
        self._reset_roles()
        self.svc = {self.index}
        self._journal(ViewState(self.view, self.log_view))
        self._broadcast(StartViewChange(self.view, self.index))
        self._maybe_send_dvc()

    def _tick_view_change(self) -> None:
        waited = self.now - self.vc_started
        if waited >= self.config.view_change_timeout_ticks:
            self._start_view_change(self.view + 1)
        elif waited % self.config.retransmit_ticks == 0:
            self._broadcast(StartViewChange(self.view, self.index))
            if self.dvc_sent:
                self.dvc_sent = False
                self._maybe_send_dvc()

    def _on_start_view_change(self, m: StartViewChange) -> None:
        if self.status in (Status.LOADING, Status.RECOVERING):
            return
        if m.view > self.view:
            self._start_view_change(m.view)
        if m.view == self.view and self.status is Status.VIEW_CHANGE:
            self.svc.add(m.replica)
            self._maybe_send_dvc()

    def _maybe_send_dvc(self) -> None:
        if not self.dvc_sent and len(self.svc) >= self.quorum:
            self.dvc_sent = True
            _, checkpoint, log = self._state_after(0)
            self._send_durable(self.primary_of(self.view), DoViewChange(
                self.view, self.log_view, self.commit, log, self.index, checkpoint))

    def _on_do_view_change(self, m: DoViewChange) -> None:
        if self.status in (Status.LOADING, Status.RECOVERING):
            return
        if m.view > self.view:
            self._start_view_change(m.view)
        if m.view != self.view or not self.is_primary:
            return
        if self.status is Status.NORMAL:
            self._send_durable(m.replica, self._start_view())
            return
        self.dvcs[m.replica] = m
        if len(self.dvcs) >= self.quorum and self.index in self.dvcs:
            self._finish_view_change()

    def _select_log(self) -> DoViewChange:
        """The paper's rule: the largest log_view, then the largest op."""
        if Bug.DVC_LOG_SELECTION in self.bugs:
            return self.dvcs[self.index]
        if Bug.DVC_IGNORE_LOG_VIEW in self.bugs:
            return max(self.dvcs.values(), key=lambda d: d.op)
        return max(self.dvcs.values(), key=lambda d: (d.log_view, d.op))

    def _finish_view_change(self) -> None:
        best = self._select_log()
        commit = max(d.commit for d in self.dvcs.values())
        self.status = Status.NORMAL
        self._become_primary_of(best.log, commit, best.checkpoint)

    def _start_view(self, commit: int | None = None) -> StartView:
        _, checkpoint, log = self._state_after(0)
        commit = self.commit if commit is None else commit
        return StartView(self.view, commit, log, self.index, checkpoint)

    def _become_primary_of(self, log: tuple[Entry, ...], commit: int,
                           checkpoint: Checkpoint | None = None) -> None:
        self._install(log, checkpoint)
        self._reset_roles()
        self.announcing = True
        start_view = self._start_view(min(max(commit, self.commit), self.op))
        for r in range(self.n):
            if r != self.index:
                self._send_durable(r, start_view)
        for entry in self.log[self.commit - self.base:]:
            self.prepared_at[entry.op] = self.now
            self.prepared_bytes[entry.op] = entry_bytes(entry)
            for req in entry.requests:
                self.inflight[req.client] = max(self.inflight.get(req.client, -1), req.request)
        self._send_durable(self.index, PrepareOk(self.view, self.op, self.index))
        self._after_sync(self._announced)
        self.commit = max(self.commit, min(commit, self.op))
        self._execute()

    def _announced(self) -> None:
        self.announcing = False

    def _on_start_view(self, m: StartView) -> None:
        if self.status in (Status.LOADING, Status.RECOVERING) or m.view < self.view:
            return
        if m.view == self.view and self.status is Status.NORMAL and self.log_view == self.view:
            return
        if self.primary_of(m.view) == self.index:
            return
        self.view = m.view
        self.status = Status.NORMAL
        self._reset_roles()
        self._install(m.log, m.checkpoint)
        self._send_durable(self.primary_of(self.view), PrepareOk(self.view, self.op, self.index))
        self._learn_commit(m.commit)

    # ---- recovery -----------------------------------------------------------------

    def _on_recovery(self, m: Recovery) -> None:
        if self.status is Status.NORMAL and self.log_view == self.view:
            log, checkpoint = None, None
            if self.is_primary:
                _, checkpoint, log = self._state_after(0)
            self._send_durable(m.replica, RecoveryResponse(
                self.view, m.nonce, self.commit, log, self.index, checkpoint))

    def _on_recovery_response(self, m: RecoveryResponse) -> None:
        if self.status is not Status.RECOVERING or self.nonce < 0 or m.nonce != self.nonce:
            return
        self.recovery[m.replica] = m
        if len(self.recovery) < self.quorum:
            return
        top = max(r.view for r in self.recovery.values())
        primary = self.recovery.get(self.primary_of(top))
        if primary is None or primary.view != top or primary.log is None:
            return
        self.view = top
        self.nonce = -1
        self._install(primary.log, primary.checkpoint)
        self._journal(Format(self.n))
        self._after_sync(lambda: self._recovered(primary.commit))

    def _recovered(self, commit: int) -> None:
        """The recovered state is durable (Format last): rejoin as a normal replica."""
        self.status = Status.NORMAL
        self._reset_roles()
        self._send_durable(self.primary_of(self.view), PrepareOk(self.view, self.op, self.index))
        self._learn_commit(commit)

    def _on_reply(self, m: Reply) -> None:
        return None

    _HANDLERS: dict[type, Callable[["Replica", Message], None]] = {
        Request: _on_request, Prepare: _on_prepare, PrepareOk: _on_prepare_ok,
        Commit: _on_commit, StartViewChange: _on_start_view_change,
        DoViewChange: _on_do_view_change, StartView: _on_start_view, GetState: _on_get_state,
        NewState: _on_new_state, Recovery: _on_recovery,
        RecoveryResponse: _on_recovery_response, Reply: _on_reply,
    }
