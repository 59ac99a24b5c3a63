"""The MCP tool ``get_cluster_metadata`` through a real MCP client session (stdio): on a
node of a 3-node cluster it adds what the node knows of each replication group; on a single
node it says clustering is off; when the node's HTTP API is off it says why there is no
group status instead of failing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp.conftest import mcp_env, mcp_session
from tests.support.cluster import leader_of, running_cluster
from tests.support.server import LurcherServer

HTTP_ENV = {"LURCHER_HTTP_ENABLED": "true", "LURCHER_HTTP_ADDRESS": "127.0.0.1:0"}


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[list[LurcherServer]]:
    with running_cluster(tmp_path, 3, env=HTTP_ENV) as servers:
        yield servers


async def test_cluster_metadata_carries_the_groups_on_a_cluster_node(nodes) -> None:
    leader = await leader_of(nodes)
    follower = next(s for s in nodes if s is not leader)
    async with mcp_session("stdio", mcp_env(follower)) as mcp:
        result = await mcp.call("get_cluster_metadata")
    assert result["clustering"] is True and len(result["nodes"]) == 3
    meta = next(g for g in result["groups"] if g["name"] == "metadata")
    assert meta["primary"] == f"node-{nodes.index(leader)}" and meta["status"] == "normal"
    assert {r["node"] for r in meta["replicas"]} == {"node-0", "node-1", "node-2"}


async def test_a_single_node_says_clustering_is_off(tmp_path: Path) -> None:
    with LurcherServer().start(tmp_path / "single", HTTP_ENV) as server:
        async with mcp_session("stdio", mcp_env(server)) as mcp:
            result = await mcp.call("get_cluster_metadata")
    assert result["clustering"] is False and "groups" not in result
    assert len(result["nodes"]) == 1


async def test_without_the_http_api_the_tool_says_why(server: LurcherServer) -> None:
    async with mcp_session("stdio", mcp_env(server)) as mcp:
        result = await mcp.call("get_cluster_metadata")
    assert "HTTP API" in result["status_unavailable"] and len(result["nodes"]) == 1
