"""The metadata group's checkpoints, on real ``lurcher-server`` processes.

Three nodes on loopback, checkpoints every few ops. Many metadata changes (streams created
and deleted in a loop) leave the metadata group's journal bounded (it starts past the
trimmed records, and holds a few checkpoint intervals of records, not one per change); a
node that was down across the checkpoints gets the group's checkpoint by state transfer,
copies the metadata it missed from a peer's store, and then serves it and takes changes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lurcher.cluster.journal_file import LENGTH, START
from tests.cluster.test_replicated_metadata import metadata_of, same_everywhere
from tests.support.cluster import leader_of, observer, running_cluster

CHECKPOINT_EVERY = 8
ROUNDS = 40  # each a creation and a deletion: 80 changes, ten checkpoint intervals
EXTRA = f"commit_timeout_ms = 5000\ncheckpoint_every_ops = {CHECKPOINT_EVERY}\n"


def journal_of(data_dir: Path) -> tuple[int, int]:
    """(position of the first record kept, records kept) of the metadata group's journal."""
    raw = (data_dir / "cluster" / "group-0.journal").read_bytes()
    start, records, at = START.unpack_from(raw)[0], 0, START.size
    while at + LENGTH.size <= len(raw):
        length = LENGTH.unpack_from(raw, at)[0]
        if at + LENGTH.size + length > len(raw):
            break
        records, at = records + 1, at + LENGTH.size + length
    return start, records


@pytest.mark.slow
async def test_the_journal_stays_bounded_and_a_node_down_across_checkpoints_catches_up(
        tmp_path: Path) -> None:
    with running_cluster(tmp_path, 3, EXTRA) as nodes:
        leader = await leader_of(nodes)
        down = next(s for s in nodes if s is not leader)
        down.kill()
        client = await observer(leader)
        try:
            for i in range(ROUNDS):
                await client.create_stream(f"churn-{i}")
                await client.delete_stream(f"churn-{i}")
            await client.create_stream("kept")
            await client.create_topic("kept", "t", partitions_count=2)
            await client.create_user("carol", "carol-password")
        finally:
            await client.close()
        for node in (s for s in nodes if s.running):
            start, records = journal_of(node.data_dir)
            assert start > 0, "the metadata journal was never trimmed"
            assert records <= 5 * CHECKPOINT_EVERY, \
                f"{records} records kept for {2 * ROUNDS + 3} changes"
        expected = await metadata_of(leader)
        assert [s[1] for s in expected[0]] == ["kept"] and "carol" in expected[1]
        down.restart()
        await same_everywhere(nodes, expected)  # what it missed, copied from a peer
        client = await observer(down)  # it decides changes on the right base again
        try:
            await client.create_stream("after-restart")
            await client.send_messages("kept", "t", [b"m0", b"m1"], 0)
            got = await client.poll_messages("kept", "t", 0, "first", 10)
            assert [m.payload for m in got.messages()] == [b"m0", b"m1"]
        finally:
            await client.close()
        await same_everywhere(nodes, await metadata_of(down))
        assert journal_of(down.data_dir)[1] <= 5 * CHECKPOINT_EVERY
        assert "copying them from another node" in down.output_path.read_text()
