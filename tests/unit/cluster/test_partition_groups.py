"""The partition groups' layout, checkpoint state and stored-batch splitting, without I/O."""

from __future__ import annotations

import numpy as np
import pytest

from lurcher.cluster.config import ClusterConfigError, decode_cluster
from lurcher.cluster.partition_groups import FIRST_PARTITION_GROUP, GroupLayout
from lurcher.cluster.partition_state import decode_state, encode_state, stored_batches
from lurcher.core.shard.dedup import Deduplication
from lurcher.core.wire.batch import MessageBatch
from tests.unit.cluster.test_cluster_config import table


def test_every_replica_set_and_rotation_is_one_group_numbered_after_the_metadata_group() -> None:
    members = GroupLayout(3).members()
    assert len(members) == 3 * 2 ** 2 and min(members) == FIRST_PARTITION_GROUP
    assert members[FIRST_PARTITION_GROUP] == [0]
    assert sorted(tuple(m) for m in members.values() if len(m) == 3) == [
        (0, 1, 2), (1, 2, 0), (2, 0, 1)]


@pytest.mark.parametrize("factor", [1, 2, 3])
def test_consecutive_partitions_of_a_topic_have_different_view_zero_primaries(factor) -> None:
    layout = GroupLayout(3)
    members = layout.members()
    groups = [layout.group_of(4, 2, p, factor) for p in range(3)]
    assert all(len(members[g]) == factor for g in groups)
    assert len({members[g][0] for g in groups}) == 3


def test_the_factor_is_clamped_to_the_node_count() -> None:
    layout = GroupLayout(3)
    assert len(layout.members()[layout.group_of(0, 0, 0, 9)]) == 3


def test_the_cluster_section_refuses_a_bad_factor_and_checkpoint_interval() -> None:
    assert decode_cluster(table()).replication_factor == 3
    with pytest.raises(ClusterConfigError, match="replication_factor"):
        decode_cluster(table(replication_factor=0))
    with pytest.raises(ClusterConfigError, match="checkpoint_every_ops"):
        decode_cluster(table(checkpoint_every_ops=-1))


def test_a_checkpoint_state_carries_counts_purges_generations_queued_ops_and_dedup_windows(
        ) -> None:
    dedup = Deduplication(True, 100, 10_000_000)
    dedup.window((1, 2, 3)).remember([b"a" * 16, b"b" * 16], 5)
    state = encode_state(7, {(1, 2, 3): 40}, [(6, b"op")], dedup, {(1, 2, 3): 2},
                         {(1, 2, 3): 1234})
    elsewhere = Deduplication(True, 100, 10_000_000)
    decoded = decode_state(state, elsewhere)
    assert (decoded.calls, decoded.queued) == (7, [(6, b"op")])
    assert [(tuple(k), n) for k, n in decoded.stored] == [((1, 2, 3), 40)]
    assert [(tuple(k), n) for k, n in decoded.purged] == [((1, 2, 3), 2)]
    assert [(tuple(k), at) for k, at in decoded.created] == [((1, 2, 3), 1234)]
    assert elsewhere.windows[(1, 2, 3)].ids == {b"a" * 16, b"b" * 16}


def stored(payloads: list[bytes], base: int, timestamp: int) -> bytes:
    batch = MessageBatch.build(payloads).writable()
    batch.stamp(base, timestamp)
    return bytes(batch.blob)


def test_stored_messages_are_cut_into_their_original_batches_by_timestamp() -> None:
    blob = stored([b"a", b"bb"], 0, 100) + stored([b"ccc"], 2, 101) + stored([b"d"], 3, 105)
    batches = stored_batches(blob)
    assert [(stamp, b.count) for stamp, b in batches] == [(100, 2), (101, 1), (105, 1)]
    again = MessageBatch(2, batches[0][1].index, memoryview(bytearray(batches[0][1].blob)))
    again.stamp(0, 100)  # appended again: the same bytes
    assert bytes(again.blob) == blob[:len(again.blob)]
    assert np.array_equal(batches[1][1].ends(), [len(stored([b"ccc"], 2, 101))])
