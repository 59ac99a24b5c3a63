"""Which replication group carries a partition: the fixed layout of partition groups.

Every node derives the same layout from the node count alone, so no placement is stored or
agreed on. For each replication factor k in 1..n, for each k-subset S of the nodes (in
``itertools.combinations`` order) and each rotation r of S, there is one group whose
members are ``S[r:] + S[:r]``; the replica core makes member ``view % k`` primary, so the
group's primary in view 0 is ``S[r]``. The groups of a factor are ordered so that their
view-0 primaries cycle through the nodes (node 0's first group, node 1's first, ...; every
node leads as many), and group ids count from ``FIRST_PARTITION_GROUP`` in that order (0 is
the metadata group).

A partition (stream, topic, partition id) of a topic with factor k goes to the groups of
factor k at index ``(stream + topic + partition) % count``: consecutive partitions of a
topic take consecutive groups, so any n consecutive partitions have n different primaries and
writes to different partitions load different machines. Many partitions share a group (a group's
Prepare carries the batches of all of them), which bounds the number of groups, journals and
timers to ``n * 2**(n-1)`` in all (12 for 3 nodes, 80 for 5), whatever the number of topics.
Invariant: the layout, hence every partition's group and replica set, depends only on ``n``, the
ids and the factor; a topic's factor never changes after it is created.
"""

from __future__ import annotations

import itertools

FIRST_PARTITION_GROUP = 1
MAX_NODES = 7  # n * 2**(n-1) groups: 448 at 7 nodes


def _interleaved(rotations: list[list[int]], nodes: int) -> list[list[int]]:
    """``rotations`` reordered so that their first members (view-0 primaries) cycle through
    the nodes: the first group of node 0, of node 1, ..., then the second of each."""
    seen = [0] * nodes

    def turn(members: list[int]) -> int:
        seen[members[0]] += 1
        return seen[members[0]]
    ranked = [(turn(m), m[0], m) for m in rotations]
    return [m for _, _, m in sorted(ranked, key=lambda r: (r[0], r[1]))]


class GroupLayout:
    def __init__(self, nodes: int) -> None:
        self.nodes = nodes
        # per factor, the (group id, members) of each of its groups, in id order
        self.by_factor: dict[int, list[tuple[int, list[int]]]] = {}
        next_id = FIRST_PARTITION_GROUP
        for k in range(1, nodes + 1):
            rotations = [[*subset[r:], *subset[:r]]
                         for subset in itertools.combinations(range(nodes), k)
                         for r in range(k)]
            self.by_factor[k] = []
            for members in _interleaved(rotations, nodes):
                self.by_factor[k].append((next_id, members))
                next_id += 1

    def members(self) -> dict[int, list[int]]:
        """Every partition group's members by group id."""
        return {gid: members for groups in self.by_factor.values() for gid, members in groups}

    def group_of(self, stream_id: int, topic_id: int, partition_id: int, factor: int) -> int:
        """The group of a partition of a topic replicated ``factor`` times (clamped to
        1..nodes)."""
        groups = self.by_factor[min(max(factor, 1), self.nodes)]
        return groups[(stream_id + topic_id + partition_id) % len(groups)][0]
