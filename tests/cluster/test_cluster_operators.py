"""What operators see of a cluster of real ``lurcher-server`` processes (HTTP API on).

``lurcher cluster status`` (the CLI as a subprocess over TCP) shows the three nodes, one
Leader and the metadata group with its primary; against a single node it prints one line.
A node's ``/metrics`` carries the ``lurcher_cluster_*`` series. Killing the leader makes a
survivor log the view change (group, view, new primary) and count it.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lurcher.sdk.cli.commands.cluster import CLUSTERING_OFF
from tests.support.cluster import eventually, leader_of, running_cluster
from tests.support.server import REPO_ROOT, LurcherServer

HTTP_ENV = {"LURCHER_HTTP_ENABLED": "true", "LURCHER_HTTP_ADDRESS": "127.0.0.1:0"}
CLI_TIMEOUT_S = 60


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[list[LurcherServer]]:
    with running_cluster(tmp_path, 3, env=HTTP_ENV) as servers:
        yield servers


def cluster_cli(server: LurcherServer, *args: str, over: tuple[str, ...] = ()
                ) -> subprocess.CompletedProcess:
    """``lurcher OVER cluster status ARGS`` (OVER: the connection, root@server over TCP by
    default), checked to exit 0."""
    over = over or ("--connection", f"iggy://iggy:iggy@{server.tcp_address}")
    proc = subprocess.run(
        [sys.executable, "-m", "lurcher.sdk.cli", *over, "cluster", "status", *args],
        capture_output=True, text=True, timeout=CLI_TIMEOUT_S, cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc
    return proc


def metric(text: str, name: str, labels: str = "") -> float | None:
    """The value of series ``name{labels}`` in a Prometheus text answer (None: absent)."""
    pattern = "^" + re.escape(name + (f"{{{labels}}}" if labels else "")) + r" (\S+)$"
    found = re.search(pattern, text, re.MULTILINE)
    return float(found.group(1)) if found else None


def scrape(server: LurcherServer) -> str:
    return httpx.get(f"http://{server.endpoints['http']}/metrics", timeout=10).text


async def test_cluster_status_shows_nodes_leader_and_the_metadata_group(nodes) -> None:
    leader = await leader_of(nodes)
    leader_name = f"node-{nodes.index(leader)}"
    follower = next(s for s in nodes if s is not leader)
    text = (await asyncio.to_thread(cluster_cli, follower)).stdout
    rows = [line.split() for line in text.splitlines()]
    node_rows = [r for r in rows if r and r[0].startswith("node-")]
    assert len(node_rows) == 3, text
    assert sum("leader" in r for r in node_rows) == 1, text
    assert any(r[0] == leader_name and "leader" in r for r in node_rows), text
    group = next(r for r in rows if r[:2] == ["0", "metadata"])
    assert group[2] == "normal" and group[4] == leader_name, text

    status = json.loads(
        (await asyncio.to_thread(cluster_cli, follower, "--json")).stdout)
    meta = status["groups"][0]
    assert meta["primary"] == leader_name and meta["status"] == "normal"
    mine = next(r for r in meta["replicas"] if r["node"] == status["node"])
    assert isinstance(mine["lag_ops"], int)


async def test_metrics_carry_the_cluster_series(nodes) -> None:
    leader = await leader_of(nodes)
    text = await asyncio.to_thread(scrape, leader)
    assert metric(text, "lurcher_cluster_leader") == 1
    assert metric(text, "lurcher_cluster_primary", 'group="0"') == 1
    assert metric(text, "lurcher_cluster_view", 'group="0"') is not None
    assert metric(text, "lurcher_cluster_view_changes_total", 'group="0"') is not None
    assert metric(text, "lurcher_cluster_commit_duration_seconds_count", 'group="0"') is not None

    async def every_lag_known() -> bool:  # a replica's lag is known once it has answered
        text = await asyncio.to_thread(scrape, leader)
        return all(metric(text, "lurcher_cluster_replica_lag_ops",
                          f'group="0",node="node-{i}"') is not None for i in range(3))
    await eventually(every_lag_known, "the lag of every replica in the metrics")


async def test_killing_the_leader_logs_and_counts_a_view_change(nodes) -> None:
    leader = await leader_of(nodes)
    survivor = next(s for s in nodes if s is not leader)
    before = metric(await asyncio.to_thread(scrape, survivor),
                    "lurcher_cluster_view_changes_total", 'group="0"')
    logged_before = len(survivor.output_path.read_text(errors="replace"))
    leader.kill()
    new_leader = await leader_of(nodes)
    new_name = f"node-{nodes.index(new_leader)}"
    line = re.compile(rf"INFO .*group 0: view change to view \d+, primary {new_name}")
    await eventually(lambda: _found(line, survivor, logged_before), "a view-change log line")
    after = metric(await asyncio.to_thread(scrape, survivor),
                   "lurcher_cluster_view_changes_total", 'group="0"')
    assert after is not None and before is not None and after > before


async def _found(pattern: re.Pattern, server: LurcherServer, start: int) -> bool:
    """Whether ``server`` logged ``pattern`` after the first ``start`` characters."""
    return bool(pattern.search(server.output_path.read_text(errors="replace")[start:]))


def test_cluster_status_of_a_single_node_is_one_line(tmp_path: Path) -> None:
    with LurcherServer().start(tmp_path / "single", HTTP_ENV) as server:
        out = cluster_cli(server).stdout
        http = server.endpoints["http"]
        over_http = cluster_cli(server, over=("--transport", "http", "--address", http,
                                              "-u", "iggy", "-p", "iggy")).stdout
        anonymous = httpx.get(f"http://{http}/cluster/status", timeout=10).status_code
    assert out.splitlines() == [CLUSTERING_OFF] and over_http == out
    assert anonymous == 401
