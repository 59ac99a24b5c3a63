"""The byte bounds of a replica's in-memory log: pipeline, checkpoint and kept ops."""

from __future__ import annotations

from lurcher.core.replication.messages import Entry, Prepare, PrepareOk, Request, entry_bytes

from repl_harness import make, make_primary, sent, settle

KB = 1024


def test_the_primary_prepares_no_more_while_pipeline_bytes_are_uncommitted() -> None:
    primary = make_primary(pipeline_bytes=3 * KB, pipeline=100)
    fx = settle(primary, primary.on_message(Request(7, 1, b"a" * 2 * KB)))
    fx = settle(primary, primary.on_message(Request(8, 1, b"b" * 2 * KB)))
    assert primary.op == 2  # 2 KB uncommitted: under the bound, the second is prepared
    for client in (9, 10):
        fx = settle(primary, primary.on_message(Request(client, 1, b"c" * 2 * KB)))
        assert sent(fx, Prepare) == [], "4 KB uncommitted: the request waits"
    assert primary.op == 2 and len(primary.pending) == 2
    fx = settle(primary, primary.on_message(PrepareOk(primary.view, 2, 0)))
    assert primary.commit == 2 and primary.op == 4, "committing releases the waiting ones"


def test_a_checkpoint_is_taken_once_checkpoint_bytes_were_executed() -> None:
    backup = make(2, view=1, checkpoint_every=1000, checkpoint_bytes=5 * KB,
                  keep_below_checkpoint=1000, keep_below_bytes=2 * KB)
    for op in range(1, 9):
        body = bytes([op]) * KB
        settle(backup, backup.on_message(Prepare(1, op - 1, Entry(1, op, (Request(100, op, body),)), 1)))
    assert backup.checkpoint is not None and backup.checkpoint.op == 5, "5 KB executed by op 5"
    kept_below = [e for e in backup.log if e.op <= backup.checkpoint.op]
    assert sum(map(entry_bytes, kept_below)) <= 2 * KB and len(kept_below) == 2
