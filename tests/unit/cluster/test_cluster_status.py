"""The operators' view: per-replica lag from real replicas, the commit-time tally, its
Prometheus buckets and the text ``lurcher cluster status`` prints."""

from __future__ import annotations

import asyncio

from lurcher.cluster.status import COMMIT_BUCKETS_S, LatencyTally, replica_lags
from lurcher.core.replication.messages import Entry, Prepare, PrepareOk, Request
from lurcher.sdk.cli.commands.cluster import CLUSTERING_OFF, status_text
from lurcher.transports.http.metrics import _buckets
from tests.unit.replication.repl_harness import make, make_primary, settle

STATUS = {
    "enabled": True, "cluster": "prod", "node": "node-1",
    "nodes": [
        {"name": "node-0", "ip": "127.0.0.1", "tcp_port": 8090, "http_port": 3000,
         "role": "follower", "status": "unreachable"},
        {"name": "node-1", "ip": "127.0.0.1", "tcp_port": 8091, "http_port": 3001,
         "role": "leader", "status": "healthy"},
    ],
    "groups": [{"group": 0, "name": "metadata", "status": "normal", "view": 4,
                "primary": "node-1", "op": 12, "commit": 11, "view_changes": 2,
                "replicas": [{"node": "node-0", "lag_ops": None},
                             {"node": "node-1", "lag_ops": 0}]}],
}


def test_a_single_node_is_one_line() -> None:
    assert status_text({"enabled": False}) == CLUSTERING_OFF
    assert "\n" not in CLUSTERING_OFF


def test_cluster_status_text_names_nodes_roles_and_groups() -> None:
    lines = status_text(STATUS).splitlines()
    assert lines[0] == "cluster prod, as node node-1 (*) sees it"
    rows = [line.split() for line in lines]
    assert ["node-1", "*", "127.0.0.1", "8091", "3001", "leader", "healthy"] in rows
    assert ["node-0", "127.0.0.1", "8090", "3000", "follower", "unreachable"] in rows
    assert ["0", "metadata", "normal", "4", "node-1", "11", "node-0=?", "node-1=0"] in rows


def test_a_group_in_view_change_shows_no_primary() -> None:
    group = {**STATUS["groups"][0], "status": "view-change", "primary": None}
    text = status_text({**STATUS, "groups": [group]})
    assert ["0", "metadata", "view-change", "4", "-", "11", "node-0=?", "node-1=0"] in [
        line.split() for line in text.splitlines()]


def test_the_primary_knows_each_backups_lag() -> None:
    primary = make_primary()  # replica 1 of 3, view 1
    for request in (1, 2, 3):
        settle(primary, primary.on_message(Request(100, request, b"x")))
    settle(primary, primary.on_message(PrepareOk(1, 3, 2)))  # replica 2 has everything
    assert primary.commit == 3
    assert replica_lags(primary, 0) == [None, 0, 0]  # replica 0 acknowledged nothing
    settle(primary, primary.on_message(PrepareOk(1, 1, 0)))
    assert replica_lags(primary, 0) == [2, 0, 0]


def test_a_backup_knows_only_its_own_lag() -> None:
    backup = make(2, view=1)
    entry = Entry(1, 1, (Request(100, 1, b"x"),))
    settle(backup, backup.on_message(Prepare(1, 0, entry, 1)))
    assert replica_lags(backup, primary_commit=4) == [None, None, 4]
    assert replica_lags(make(0), primary_commit=4) == [None, None, None]  # not normal yet


def test_the_tally_counts_per_bucket_and_buckets_are_cumulative() -> None:
    tally = LatencyTally()
    for seconds in (0.0001, 0.003, 0.003, 60.0):
        tally.observe(seconds)
    assert tally.count == 4 and abs(tally.total_s - 60.0061) < 1e-9
    buckets = _buckets(tally)
    assert len(buckets) == len(COMMIT_BUCKETS_S) + 1 and buckets[-1] == ("+Inf", 4)
    assert dict(buckets)[repr(0.0005)] == 1 and dict(buckets)[repr(0.005)] == 3
    assert dict(buckets)[repr(10.0)] == 3


async def test_the_timer_observes_only_futures_that_succeed() -> None:
    tally, loop = LatencyTally(), asyncio.get_running_loop()
    ok, failed, cancelled = (loop.create_future() for _ in range(3))
    for future in (ok, failed, cancelled):
        future.add_done_callback(tally.timer(loop.time))
    ok.set_result(b"")
    failed.set_exception(TimeoutError())
    cancelled.cancel()
    await asyncio.sleep(0)
    assert tally.count == 1
