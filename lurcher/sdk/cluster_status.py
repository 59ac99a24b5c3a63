"""Reading lurcher's cluster status (``GET /cluster/status``, lurcher only) from a ``Client``.

The status (replication groups, views, primaries, lag) has no binary command: Iggy's
GetClusterMetadata (12) cannot carry it without breaking Iggy's clients. A client on HTTP
reads the route directly; on another transport it asks GetClusterMetadata for the HTTP port
of the node it is connected to (lurcher lists that node first), logs in there over HTTP with
its own credentials, reads the route and closes that second connection.
"""

from __future__ import annotations

from typing import Any

import msgspec

from lurcher.core.wire.commands import CLUSTER_STATUS_ROUTE
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.sdk.connection.http import HttpConnection


async def read_cluster_status(client: Any) -> dict[str, Any]:
    """The node's status JSON (``{"enabled": false}`` on a single node). Raises IggyError
    (FEATURE_UNAVAILABLE when the node's HTTP API is off)."""
    conn, _ = await client._current(client._login)
    if isinstance(conn, HttpConnection):
        return await conn.get_json(CLUSTER_STATUS_ROUTE)
    meta = await client.get_cluster_metadata()
    port = meta.nodes[0].http_port if meta.nodes else 0
    if not port:
        raise IggyError(ErrorCode.FEATURE_UNAVAILABLE, "cluster status is served by the "
                        "node's HTTP API, which is off on this node")
    if not client.config.has_credentials:
        raise IggyError(ErrorCode.UNAUTHENTICATED, "cluster status logs in to the node's "
                        "HTTP API with the client's credentials; this client has none")
    host, _ = client.config.host_port()
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    config = msgspec.structs.replace(client.config, transport="http", address=address,
                                     heartbeat_interval_s=None, reconnection_enabled=False)
    from lurcher.sdk.client import Client  # the client module imports the API mixins
    async with Client(config=config) as http:
        return await read_cluster_status(http)
