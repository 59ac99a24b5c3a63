"""A cluster node hands the replica core only messages that speak for the node whose link
delivered them: a replica index naming another member (or none), or a Request with
another node's client id, is dropped, so one node cannot vote as two. The node's delivery
path (``ClusterNode._deliver``) runs here on a real replica, without sockets or files."""

from __future__ import annotations

from lurcher.cluster.host import ClusterNode, _Group
from lurcher.core.replication.messages import DoViewChange, PrepareOk, Request
from tests.unit.replication.repl_harness import make_primary, settle

GROUP = 5


def primary_node() -> tuple[ClusterNode, _Group]:
    """Node 1, primary of a group of nodes 0, 1, 2 (replica i is node i) in view 1, with
    op 1 prepared and synced here: one more acknowledgement commits it."""
    replica = make_primary()
    settle(replica, replica.on_message(Request(0x0101, 1, b"op")))
    assert (replica.op, replica.commit) == (1, 0)
    node = ClusterNode.__new__(ClusterNode)
    group = _Group(replica, [0, 1, 2], None, None, [])
    node.groups, node.misattributed, node.on_forward = {GROUP: group}, set(), None
    node._apply = lambda g, fx: settle(replica, fx)
    node._flush_soon = lambda g, grp: None
    return node, group


def test_an_acknowledgement_naming_another_member_is_not_counted() -> None:
    node, group = primary_node()
    node._deliver(0, GROUP, PrepareOk(1, 1, 2))  # node 0 acknowledging as node 2
    node._deliver(0, GROUP, PrepareOk(1, 1, 7))  # and as a replica the group lacks
    assert group.replica.commit == 0
    node._deliver(0, GROUP, PrepareOk(1, 1, 0))  # as itself: counted
    assert group.replica.commit == 1


def test_view_change_votes_naming_others_are_not_counted() -> None:
    node, group = primary_node()
    for claimed in (0, 9):  # node 2 voting as node 0 and as no member, for view 4 (node 1's)
        node._deliver(2, GROUP, DoViewChange(4, 1, 0, (), claimed))
    assert group.replica.dvcs == {}
    node._deliver(2, GROUP, DoViewChange(4, 1, 0, (), 2))  # as itself: counted
    assert set(group.replica.dvcs) == {2}


def test_a_request_with_another_node_s_client_id_is_dropped() -> None:
    node, group = primary_node()
    node._deliver(2, GROUP, Request(0x0100, 1, b"as node 0"))
    node._deliver(0, GROUP, Request(0x0100, 1, b"node 0's own"))
    assert [r.body for e in group.replica.log for r in e.requests] == [b"op", b"node 0's own"]
