"""System commands: ping, stats, clients, cluster metadata and status, snapshot."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lurcher.core.wire.requests.system.get_client import GetClient
from lurcher.core.wire.requests.system.get_clients import GetClients
from lurcher.core.wire.requests.system.get_cluster_metadata import GetClusterMetadata
from lurcher.core.wire.requests.system.get_me import GetMe
from lurcher.core.wire.requests.system.get_snapshot_file import GetSnapshotFile
from lurcher.core.wire.requests.system.get_stats import GetStats
from lurcher.core.wire.requests.system.ping import Ping
from lurcher.core.wire.responses.clients import ClientDetails, ClientHeader
from lurcher.core.wire.responses.cluster import ClusterMetadata
from lurcher.core.wire.responses.stats import Stats
from lurcher.sdk.api.base import ApiBase

SNAPSHOT_ALL = 100
SNAPSHOT_DEFLATED = 2


class SystemApi(ApiBase):
    async def ping(self) -> None:
        """Ping (1); allowed before login."""
        await self._call(Ping())

    async def get_stats(self) -> Stats:
        return await self._call(GetStats())

    async def get_me(self) -> ClientDetails:
        """This connection's client record (id, user, transport, address, joined groups)."""
        return await self._call(GetMe())

    async def get_client(self, client_id: int) -> ClientDetails | None:
        return await self._call(GetClient(client_id))

    async def get_clients(self) -> list[ClientHeader]:
        return await self._call(GetClients())

    async def get_cluster_metadata(self) -> ClusterMetadata:
        return await self._call(GetClusterMetadata())

    async def get_cluster_status(self) -> dict[str, Any]:
        """lurcher only: what the node knows of its cluster (nodes, replication groups,
        views, primaries, lag) as JSON; ``{"enabled": false}`` on a single node. Read from
        the node's HTTP API (``sdk.cluster_status``). Raises IggyError."""
        from lurcher.sdk.cluster_status import read_cluster_status
        return await read_cluster_status(self)

    async def get_snapshot(self, compression: int = SNAPSHOT_DEFLATED,
                           snapshot_types: Sequence[int] = (SNAPSHOT_ALL,)) -> bytes:
        """GetSnapshotFile (11): the server's ZIP snapshot as bytes."""
        snapshot = await self._call(GetSnapshotFile(compression, list(snapshot_types)))
        return snapshot.data
