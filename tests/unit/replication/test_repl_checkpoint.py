"""Checkpoints, journal trimming and state transfer from a checkpoint (one replica by hand)."""

from __future__ import annotations

from lurcher.core.replication.journal import (
    Append, Discard, Format, Snapshot, ViewState, Write, decode_records, encode_record, stored_bytes,
)
from lurcher.core.replication.messages import (
    Checkpoint, ClientSlot, DoViewChange, Entry, GetState, NewState, Prepare, PrepareOk,
    Recovery, RecoveryResponse, Reply, Request, StartView, StartViewChange,
)
from lurcher.core.replication.replica import Config, Replica, Status
from lurcher.core.replication.sim.model import AppendLog

from repl_harness import make, make_primary, sent, settle


def entry(view: int, op: int, client: int = 100) -> Entry:
    return Entry(view, op, (Request(client, op, b"v%d" % op),))


def result(position: int, prev: bytes) -> bytes:
    return position.to_bytes(8, "little") + prev


def checkpoint_at(op: int) -> Checkpoint:
    """The checkpoint of ops ``entry(_, 1..op)`` executed on a fresh ``AppendLog``."""
    model = AppendLog()
    last = b""
    for k in range(1, op + 1):
        last = model.apply(b"v%d" % k)
    return Checkpoint(op, model.snapshot(), (ClientSlot(100, op, last),))


def committed_backup(ops: int, **config: int) -> Replica:
    """Replica 2, backup of view 1, that executed ops 1..ops."""
    backup = make(2, view=1, **config)
    for op in range(1, ops + 1):
        settle(backup, backup.on_message(Prepare(1, op - 1, entry(1, op), 1)))
    settle(backup, backup.on_message(Prepare(1, ops, entry(1, ops + 1), 1)))
    assert backup.executed == ops
    return backup


def test_a_checkpoint_trims_memory_and_journal_only_once_its_segment_is_synced() -> None:
    backup = make(2, view=1, checkpoint_every=2, keep_below_checkpoint=1)
    settle(backup, backup.on_message(Prepare(1, 0, entry(1, 1), 1)))
    settle(backup, backup.on_message(Prepare(1, 1, entry(1, 2), 1)))
    fx = backup.on_message(Prepare(1, 2, entry(1, 3), 1))
    records = [decode_records([w.data])[0] for w in fx.storage if isinstance(w, Write)]
    assert [type(r).__name__ for r in records] == [
        "Append", "Format", "Snapshot", "ViewState", "Append"]
    snapshot = records[2]
    assert snapshot.checkpoint.op == 2 and AppendLog.from_snapshot(
        snapshot.checkpoint.state).values == [b"v1", b"v2"]
    assert [i for i in fx.storage if isinstance(i, Discard)] == []
    assert backup.checkpoint is None and backup.base == 0, "nothing trimmed before the sync"
    fx = settle(backup, fx)
    segment = [w.pos for w in fx.storage if isinstance(w, Write)][1]
    assert [i for i in fx.storage if isinstance(i, Discard)] == [Discard(segment)]
    assert backup.checkpoint.op == 2 and backup.base == 1 and [e.op for e in backup.log] == [2, 3]


def test_get_state_below_the_trimmed_prefix_gets_the_checkpoint_and_the_log_above() -> None:
    primary = make_primary(checkpoint_every=2)
    for request in (1, 2, 3):
        settle(primary, primary.on_message(Request(100, request, b"v%d" % request)))
        settle(primary, primary.on_message(PrepareOk(1, request, 2)))
    assert primary.checkpoint.op == 2 and primary.base == 2 and primary.op == 3
    fx = settle(primary, primary.on_message(GetState(1, 1, 0)))
    [(to, reply)] = sent(fx, NewState)
    assert to == 0 and reply.after == 2 and reply.checkpoint == primary.checkpoint
    assert [e.op for e in reply.log] == [3]
    assert reply.checkpoint.table == (ClientSlot(100, 2, result(2, b"v1")),)
    fx = settle(primary, primary.on_message(GetState(1, 2, 0)))
    assert sent(fx, NewState)[0][1].checkpoint is None, "ops above the checkpoint are kept"


def test_new_state_with_a_checkpoint_restores_state_and_client_table() -> None:
    backup = make(2, view=1)
    settle(backup, backup.on_message(Prepare(1, 0, entry(1, 5), 1)))
    checkpoint = checkpoint_at(4)
    fx = settle(backup, backup.on_message(NewState(1, 4, 5, (entry(1, 5),), 1, checkpoint)))
    assert backup.base == 4 and backup.op == 5 and backup.executed == 5
    assert fx.restored == [(checkpoint, True)]
    assert backup.service.values == [b"v1", b"v2", b"v3", b"v4", b"v5"]
    assert backup.table[100] == (5, result(5, b"v4"))
    assert sent(fx, PrepareOk) == [(1, PrepareOk(1, 5, 2))]
    assert any(isinstance(r, Snapshot) for w in fx.storage if isinstance(w, Write)
               for r in decode_records([w.data]))


def test_a_new_state_checkpoint_not_matching_after_is_ignored() -> None:
    backup = make(2, view=1)
    fx = settle(backup, backup.on_message(NewState(1, 3, 5, (entry(1, 5),), 1, checkpoint_at(4))))
    assert backup.op == 0 and fx.restored == [] and sent(fx, PrepareOk) == []


def test_restarted_replica_replays_its_checkpoint_and_the_table_answers_retries() -> None:
    backup = make(2, view=1, checkpoint_every=3)
    stored: list[bytes] = [encode_record(Format(3))]
    writes: list[Write] = []
    discards: list[Discard] = []
    for op in range(1, 5):
        fx = settle(backup, backup.on_message(Prepare(1, op - 1, entry(1, op), 1)))
        writes += [w for w in fx.storage if isinstance(w, Write)]
        discards += [d for d in fx.storage if isinstance(d, Discard)]
    for w in writes:
        del stored[w.pos:]
        stored.extend(b"" for _ in range(w.pos - len(stored)))
        stored.append(w.data)
    [discard] = discards
    journal = Replica(2, backup.config, AppendLog(), nonce=5)
    journal.start()
    fx = journal.on_loaded(stored[discard.below:], discard.below)
    assert journal.base == 3 and journal.executed == 3 and [e.op for e in journal.log] == [4]
    assert fx.restored and fx.restored[0][0].op == 3
    assert journal.service.values == [b"v1", b"v2", b"v3"]
    assert journal.table[100] == (3, result(3, b"v2"))


def test_a_torn_checkpoint_segment_leaves_the_previous_state() -> None:
    backup = make(2, view=1, checkpoint_every=2)
    stored = [encode_record(Format(3)), encode_record(ViewState(1, 1))]
    for op in (1, 2):
        fx = backup.on_message(Prepare(1, op - 1, entry(1, op), 1))
        stored += [w.data for w in fx.storage if isinstance(w, Write)]
        settle(backup, fx)
    fx = backup.on_message(Prepare(1, 2, entry(1, 3), 1))
    new = [w.data for w in fx.storage if isinstance(w, Write)]
    assert isinstance(decode_records([new[2]])[0], Snapshot)
    torn = stored + new[:2] + [stored_bytes(new[2])[:-4] + b"\x00" * 4]  # the Snapshot record is torn
    restarted = Replica(2, backup.config, AppendLog(), nonce=5)
    restarted.start()
    fx = restarted.on_loaded(torn)
    assert fx.restored == [] and restarted.base == 0 and [e.op for e in restarted.log] == [1, 2, 3]


def test_a_checkpoint_segment_cut_after_its_first_restated_op_keeps_the_later_ops() -> None:
    """The old records hold ops 1..4; the checkpoint segment restating 3 and 4 above
    checkpoint 2 was cut after op 3: op 4 must survive the replay (long-run seed 1015974)."""
    ops = [entry(1, op) for op in range(1, 5)]
    stored = [encode_record(r) for r in (
        Format(3), ViewState(1, 1), *(Append(e) for e in ops),
        Format(3), Snapshot(checkpoint_at(2)), ViewState(1, 1), Append(ops[2]))]
    restarted = Replica(2, Config(replicas=3), AppendLog(), nonce=5)
    restarted.start()
    restarted.on_loaded(stored)
    assert restarted.base == 2 and restarted.log == ops[2:]


def test_a_different_entry_in_the_journal_replaces_that_op_and_those_after() -> None:
    changed = Entry(2, 2, (Request(101, 1, b"other"),))
    stored = [encode_record(r) for r in (
        Format(3), ViewState(1, 1), *(Append(entry(1, op)) for op in (1, 2, 3)),
        ViewState(2, 2), Append(changed))]
    restarted = Replica(2, Config(replicas=3), AppendLog(), nonce=5)
    restarted.start()
    restarted.on_loaded(stored)
    assert restarted.log == [entry(1, 1), changed]


def test_do_view_change_from_a_trimmed_log_carries_the_checkpoint() -> None:
    backup = committed_backup(3, checkpoint_every=2)
    assert backup.base == 2
    fx = settle(backup, backup.on_message(StartViewChange(3, 1)))
    [(to, dvc)] = sent(fx, DoViewChange)
    assert to == 0
    assert dvc.checkpoint == backup.checkpoint and dvc.after == 2 and dvc.op == 4
    assert [e.op for e in dvc.log] == [3, 4]


def test_a_new_primary_behind_the_checkpoint_restores_it_from_do_view_change() -> None:
    replica = make(1, max_batch=1)
    settle(replica, replica.on_message(StartViewChange(1, 0)))
    checkpoint = checkpoint_at(4)
    settle(replica, replica.on_message(StartViewChange(1, 2)))
    fx = settle(replica, replica.on_message(
        DoViewChange(1, 0, 4, (entry(0, 5),), 2, checkpoint)))
    assert replica.is_primary and replica.status is Status.NORMAL
    assert replica.base == 4 and replica.op == 5 and replica.executed == 4
    assert fx.restored == [(checkpoint, True)]
    [(_, start_view)] = sent(fx, StartView)[:1]
    assert start_view.checkpoint == checkpoint and [e.op for e in start_view.log] == [5]
    retry = settle(replica, replica.on_message(Request(100, 4, b"v4")))
    assert retry.replies == [Reply(1, 100, 4, result(4, b"v3"))] and retry.executed == []


def test_start_view_with_a_checkpoint_brings_a_backup_past_the_trimmed_ops() -> None:
    backup = make(0, view=1)
    checkpoint = checkpoint_at(4)
    fx = settle(backup, backup.on_message(StartView(2, 5, (entry(2, 5),), 2, checkpoint)))
    assert backup.view == 2 and backup.base == 4 and backup.executed == 5
    assert sent(fx, PrepareOk) == [(2, PrepareOk(2, 5, 0))]


def test_recovery_from_a_trimmed_primary_restores_its_checkpoint() -> None:
    primary = make_primary(checkpoint_every=2)
    for request in (1, 2, 3):
        settle(primary, primary.on_message(Request(100, request, b"v%d" % request)))
        settle(primary, primary.on_message(PrepareOk(1, request, 2)))
    fx = settle(primary, primary.on_message(Recovery(9, 0)))
    [(_, response)] = sent(fx, RecoveryResponse)
    assert response.checkpoint == primary.checkpoint and [e.op for e in response.log] == [3]
    lost = Replica(0, Config(replicas=3), AppendLog(), nonce=9)
    lost.start()
    settle(lost, lost.on_loaded([]))
    settle(lost, lost.on_message(RecoveryResponse(1, 9, 3, None, 2)))
    fx = settle(lost, lost.on_message(response))
    assert lost.status is Status.NORMAL and lost.base == 2 and lost.executed == 3
    assert lost.service.values == [b"v1", b"v2", b"v3"]
