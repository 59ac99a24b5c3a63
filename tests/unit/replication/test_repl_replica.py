"""Per-transition tests of the VR replica state machine (one replica driven by hand)."""

from __future__ import annotations

import pytest

from lurcher.core.replication.journal import (
    Format, Read, Sync, ViewState, Write, encode_record, stored_bytes,
)
from lurcher.core.replication.messages import (
    Commit, DoViewChange, Entry, GetState, NewState, Prepare, PrepareOk, Recovery,
    RecoveryResponse, Reply, Request, StartView, StartViewChange,
)
from lurcher.core.replication.replica import Status

from repl_harness import make, make_primary, sent, settle


def entry(view: int, op: int, client: int = 100, request: int | None = None) -> Entry:
    request = op if request is None else request
    return Entry(view, op, (Request(client, request, b"v%d" % op),))


def test_backup_acks_a_prepare_only_after_its_journal_write_is_synced() -> None:
    backup = make(2, view=1)
    fx = backup.on_message(Prepare(1, 0, entry(1, 1), 1))
    assert [type(i) for i in fx.storage] == [Write] and sent(fx, PrepareOk) == []
    fx = backup.on_written(fx.storage[0].pos)
    assert [type(i) for i in fx.storage] == [Sync] and sent(fx, PrepareOk) == []
    fx = backup.on_synced(fx.storage[0].upto)
    assert sent(fx, PrepareOk) == [(1, PrepareOk(1, 1, 2))]


def test_primary_commits_after_f_plus_one_and_replies_once() -> None:
    primary = make_primary(max_batch=64)
    fx = settle(primary, primary.on_message(Request(100, 1, b"a")))
    assert sent(fx, Prepare) == [], "below max_batch the request waits for a tick"
    fx = settle(primary, primary.on_tick())
    assert {to for to, _ in sent(fx, Prepare)} == {0, 2}
    assert primary.commit == 0 and fx.replies == []
    fx = settle(primary, primary.on_message(PrepareOk(1, 1, 2)))
    assert primary.commit == 1
    assert fx.replies == [Reply(1, 100, 1, (1).to_bytes(8, "little"))]


@pytest.mark.parametrize("n, backups_needed", [(2, 1), (4, 2)])
def test_an_even_cluster_needs_more_than_half(n: int, backups_needed: int) -> None:
    """Two or four replicas: a quorum is a majority (2 of 2, 3 of 4), never half, so two
    halves of a partition can never both commit."""
    primary = make_primary(n)
    settle(primary, primary.on_message(Request(100, 1, b"a")))
    backups = [r for r in range(n) if r != primary.index]
    for k, backup in enumerate(backups[:backups_needed]):
        assert primary.commit == 0, f"committed with {k} of {backups_needed} backups"
        settle(primary, primary.on_message(PrepareOk(1, 1, backup)))
    assert primary.commit == 1


def test_five_replicas_need_three_acknowledgements() -> None:
    primary = make_primary(n=5, max_batch=1)
    settle(primary, primary.on_message(Request(100, 1, b"a")))
    settle(primary, primary.on_message(PrepareOk(1, 1, 0)))
    assert primary.commit == 0
    settle(primary, primary.on_message(PrepareOk(1, 1, 3)))
    assert primary.commit == 1


def test_client_table_answers_a_retry_without_executing_again() -> None:
    primary = make_primary()
    settle(primary, primary.on_message(Request(100, 1, b"a")))
    settle(primary, primary.on_message(PrepareOk(1, 1, 2)))
    retry = settle(primary, primary.on_message(Request(100, 1, b"a")))
    assert retry.replies == [Reply(1, 100, 1, (1).to_bytes(8, "little"))]
    assert sent(retry, Prepare) == [] and retry.executed == [] and primary.op == 1
    stale = settle(primary, primary.on_message(Request(100, 0, b"old")))
    assert stale.replies == [] and primary.op == 1


def test_a_retry_of_an_uncommitted_request_is_not_prepared_twice() -> None:
    primary = make_primary()
    settle(primary, primary.on_message(Request(100, 1, b"a")))
    settle(primary, primary.on_message(Request(100, 1, b"a")))
    settle(primary, primary.on_tick())
    assert primary.op == 1


def test_requests_are_batched_into_one_prepare() -> None:
    primary = make_primary(max_batch=3)
    for client in (100, 101):
        assert sent(settle(primary, primary.on_message(Request(client, 1, b"x"))), Prepare) == []
    fx = settle(primary, primary.on_message(Request(102, 1, b"y")))
    prepares = sent(fx, Prepare)
    assert len(prepares) == 2 and len(prepares[0][1].entry.requests) == 3
    assert primary.op == 1


def test_backup_executes_what_a_commit_heartbeat_reports() -> None:
    backup = make(2, view=1)
    settle(backup, backup.on_message(Prepare(1, 0, entry(1, 1), 1)))
    assert backup.commit == 0
    fx = settle(backup, backup.on_message(Commit(1, 1, 1)))
    assert backup.commit == 1 and [e.op for e in fx.committed] == [1] and fx.replies == []


def test_silent_primary_makes_a_backup_start_a_view_change() -> None:
    backup = make(2, view=1, view_timeout_ticks=5)
    fx = None
    for _ in range(5):
        fx = settle(backup, backup.on_tick())
    assert backup.status is Status.VIEW_CHANGE and backup.view == 2
    assert sorted(to for to, _ in sent(fx, StartViewChange)) == [0, 1]


def test_do_view_change_goes_to_the_new_primary_after_a_quorum_and_a_sync() -> None:
    backup = make(0, view=1)
    fx = backup.on_message(StartViewChange(2, 1))
    assert backup.status is Status.VIEW_CHANGE and sent(fx, DoViewChange) == []
    fx = settle(backup, fx)
    assert [to for to, _ in sent(fx, DoViewChange)] == [2]


def test_new_primary_selects_the_log_of_the_latest_normal_view_not_the_longest() -> None:
    primary = make(0, n=5, view=1)
    settle(primary, primary.on_message(Prepare(1, 0, entry(1, 1), 1)))
    newer = (entry(1, 1), entry(3, 2))
    longer_stale = (entry(1, 1), entry(1, 2, request=9), entry(1, 3, request=10))
    settle(primary, primary.on_message(StartViewChange(5, 1)))
    settle(primary, primary.on_message(StartViewChange(5, 2)))
    settle(primary, primary.on_message(DoViewChange(5, 1, 1, longer_stale, 1)))
    assert primary.status is Status.VIEW_CHANGE, "two of five DoViewChanges are not a quorum"
    fx = settle(primary, primary.on_message(DoViewChange(5, 3, 1, newer, 2)))
    assert primary.status is Status.NORMAL and primary.view == 5
    assert tuple(primary.log) == newer
    assert sorted(to for to, _ in sent(fx, StartView)) == [1, 2, 3, 4]


def test_start_view_installs_the_log_and_acknowledges_it() -> None:
    backup = make(0, view=1)
    log = (entry(1, 1), entry(2, 2))
    fx = settle(backup, backup.on_message(StartView(2, 1, log, 2)))
    assert backup.status is Status.NORMAL and backup.view == 2 and tuple(backup.log) == log
    assert sent(fx, PrepareOk) == [(2, PrepareOk(2, 2, 0))] and backup.commit == 1


def test_a_gap_asks_for_state_and_new_state_fills_it() -> None:
    backup = make(2, view=1)
    fx = settle(backup, backup.on_message(Prepare(1, 0, entry(1, 3), 1)))
    assert sent(fx, GetState) == [(1, GetState(1, 0, 2))] and backup.op == 0
    fx = settle(backup, backup.on_message(NewState(1, 0, 2, (entry(1, 1), entry(1, 2), entry(1, 3)), 1)))
    assert backup.op == 3 and backup.commit == 2
    assert sent(fx, PrepareOk) == [(1, PrepareOk(1, 3, 2))]


def test_a_message_from_a_newer_view_makes_a_backup_fetch_that_views_log() -> None:
    backup = make(0, view=1)
    fx = settle(backup, backup.on_message(Commit(4, 0, 1)))
    assert backup.view == 4 and backup.log_view == 1
    assert sent(fx, GetState) == [(1, GetState(4, 0, 0))]


def test_a_restarted_primary_does_not_resume_its_view() -> None:
    replica = make(1, view=1)
    assert replica.status is Status.VIEW_CHANGE and replica.view == 2


def test_a_lost_disk_recovers_through_the_nonce_protocol() -> None:
    replica = make(2)
    replica = type(replica)(2, replica.config, replica.service, nonce=77)
    assert isinstance(replica.start().storage[0], Read)
    fx = replica.on_loaded([])
    assert replica.status is Status.RECOVERING
    assert sorted(to for to, _ in sent(fx, Recovery)) == [0, 1]
    log = (entry(1, 1), entry(1, 2))
    settle(replica, replica.on_message(RecoveryResponse(1, 76, 2, log, 1)))
    settle(replica, replica.on_message(RecoveryResponse(1, 77, 0, None, 0)))
    assert replica.status is Status.RECOVERING, "wrong nonce or no primary yet"
    fx = replica.on_message(RecoveryResponse(1, 77, 2, log, 1))
    assert replica.status is Status.RECOVERING, "not normal before the recovered log is durable"
    assert any(isinstance(i, Write) for i in fx.storage) and sent(fx, PrepareOk) == []
    fx = settle(replica, fx)
    assert replica.status is Status.NORMAL and tuple(replica.log) == log and replica.commit == 2
    assert sent(fx, PrepareOk) == [(1, PrepareOk(1, 2, 2))]


def test_a_normal_replica_answers_recovery_and_only_the_primary_sends_its_log() -> None:
    backup = make(2, view=1)
    fx = settle(backup, backup.on_message(Recovery(5, 0)))
    assert sent(fx, RecoveryResponse) == [(0, RecoveryResponse(1, 5, 0, None, 2))]
    primary = make_primary()
    fx = settle(primary, primary.on_message(Recovery(5, 0)))
    assert sent(fx, RecoveryResponse)[0][1].log == ()


def test_journal_replay_survives_a_torn_last_record() -> None:
    backup = make(2, view=1)
    fx = settle(backup, backup.on_message(Prepare(1, 0, entry(1, 1), 1)))
    fx2 = settle(backup, backup.on_message(Prepare(1, 0, entry(1, 2), 1)))
    stored = [encode_record(Format(3)), *(w.data for w in _writes(fx)), *(w.data for w in _writes(fx2))]
    stored[-1] = stored_bytes(stored[-1])[:-3] + b"\x00\x00\x00"
    restarted = make(2)
    restarted = type(restarted)(2, restarted.config, restarted.service, nonce=1)
    restarted.start()
    settle(restarted, restarted.on_loaded(stored))
    assert [e.op for e in restarted.log] == [1]


def _writes(fx: object) -> list[Write]:
    return [i for i in fx.storage if isinstance(i, Write)]


def test_a_reloaded_journal_is_synced_before_anything_vouches_for_it() -> None:
    """A crash may leave unsynced records readable (page cache); vouching for them before a
    sync could acknowledge ops a power loss then takes (long-run seed 1008119)."""
    backup = make(2, view=1)
    fx = settle(backup, backup.on_message(Prepare(1, 0, entry(1, 1), 1)))
    stored = [encode_record(Format(3)), encode_record(ViewState(1, 1)),
              *(w.data for w in _writes(fx))]
    restarted = type(backup)(2, backup.config, backup.service, nonce=3)
    restarted.start()
    fx = restarted.on_loaded(stored)
    assert [i for i in fx.storage if isinstance(i, Sync)] == [Sync(len(stored))]
    assert restarted.status is Status.NORMAL
    fx = restarted.on_message(Prepare(1, 0, entry(1, 1), 1))
    assert sent(fx, PrepareOk) == [], "a PrepareOk vouched for a reloaded, unsynced journal"
    fx = restarted.on_synced(len(stored))
    assert sent(fx, PrepareOk) == [(1, PrepareOk(1, 1, 2))]


def test_flush_prepares_waiting_requests_at_once_in_one_prepare() -> None:
    primary = make_primary(max_batch=64)
    for client in (100, 101):
        settle(primary, primary.on_message(Request(client, 1, b"x")))
    fx = settle(primary, primary.flush())
    prepares = [m for to, m in sent(fx, Prepare) if to == 0]
    assert [len(p.entry.requests) for p in prepares] == [2]


def test_a_prepare_carries_no_more_request_bytes_than_max_batch_bytes() -> None:
    primary = make_primary(max_batch=64, max_batch_bytes=10, pipeline=8)
    for client, body in ((100, b"a" * 6), (101, b"b" * 4), (102, b"c" * 1), (103, b"d" * 30)):
        settle(primary, primary.on_message(Request(client, 1, body)))
    fx = settle(primary, primary.flush())
    prepares = [m for to, m in sent(fx, Prepare) if to == 0]
    assert [[len(r.body) for r in p.entry.requests] for p in prepares] == [[6, 4], [1], [30]]


def test_a_backup_asked_for_a_view_change_starts_it_towards_that_view() -> None:
    backup = make(2, view=1)
    fx = backup.request_view(3)
    assert backup.view == 3 and backup.status.value == "view-change"
    assert {to for to, m in sent(fx, StartViewChange)} == {0, 1}
    assert backup.request_view(2).sends == [] and backup.view == 3  # only from normal
