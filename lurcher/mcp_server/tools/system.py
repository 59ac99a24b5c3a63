"""System tools: ping, stats, this session's client, other clients, cluster metadata, snapshot."""

from __future__ import annotations

import io
import zipfile
from typing import Annotated, Any, Literal

import msgspec

from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.requests.system.get_snapshot_file import COMPRESSIONS, SNAPSHOT_TYPES
from lurcher.mcp_server.gate import Access
from lurcher.mcp_server.render import plain
from lurcher.mcp_server.tools.base import U32, Args, Context, ok, register

_COMPRESSION_CODES = {name: code for code, name in COMPRESSIONS.items()}
_SNAPSHOT_CODES = {name: code for code, name in SNAPSHOT_TYPES.items()}
SNAPSHOT_TEXT_PREVIEW_BYTES = 4096


class NoArgs(Args):
    pass


class GetClientArgs(Args):
    client_id: Annotated[U32, msgspec.Meta(description="Client (connection) id, as listed "
                                                       "by get_clients.")]


SnapshotType = Literal["filesystem_overview", "process_list", "resource_usage", "test",
                       "server_logs", "server_config", "all"]


class SnapshotArgs(Args):
    compression: Literal["stored", "deflated", "bzip2", "zstd", "lzma", "xz"] = "deflated"
    types: Annotated[list[SnapshotType], msgspec.Meta(
        min_length=1, description="What to collect; \"all\" alone collects everything.")
    ] = msgspec.field(default_factory=lambda: ["all"])


@register("ping", Access.READ, "Check that the lurcher server answers. Returns ok.", NoArgs)
async def ping(ctx: Context, a: NoArgs) -> dict[str, Any]:
    await ctx.client.ping()
    return ok("ping")


@register("get_stats", Access.READ,
          "Server statistics: counts of streams, topics, partitions, segments, messages and "
          "clients, bytes stored, memory, CPU, disk, uptime and version.", NoArgs)
async def get_stats(ctx: Context, a: NoArgs) -> dict[str, Any]:
    return plain(await ctx.client.get_stats())


@register("get_me", Access.READ,
          "The client record of this MCP server's own connection to lurcher (client id, user "
          "id, transport, address, consumer groups joined).", NoArgs)
async def get_me(ctx: Context, a: NoArgs) -> dict[str, Any]:
    return plain(await ctx.client.get_me())


@register("get_client", Access.READ,
          "One connected client by id: its user, transport, address and the consumer groups "
          "it has joined.", GetClientArgs)
async def get_client(ctx: Context, a: GetClientArgs) -> dict[str, Any]:
    found = await ctx.client.get_client(a.client_id)
    return plain(found) if found else {"found": False, "client_id": a.client_id}


@register("get_clients", Access.READ,
          "Every client connected to the server (id, user id, transport, address, number of "
          "consumer groups).", NoArgs)
async def get_clients(ctx: Context, a: NoArgs) -> dict[str, Any]:
    clients = plain(await ctx.client.get_clients())
    return {"count": len(clients), "clients": clients}


@register("get_cluster_metadata", Access.READ,
          "The cluster's name and nodes (addresses, ports, role, status). When the node's "
          "HTTP API is on: \"clustering\" (false on a single node) and \"groups\", what the "
          "node knows of each replication group (view, primary, commit number, each "
          "replica's lag in ops where known); else \"status_unavailable\" says why.",
          NoArgs)
async def get_cluster_metadata(ctx: Context, a: NoArgs) -> dict[str, Any]:
    meta = plain(await ctx.client.get_cluster_metadata())
    try:
        status = await ctx.client.get_cluster_status()
    except IggyError as e:
        meta["status_unavailable"] = str(e)
        return meta
    meta["clustering"] = status.get("enabled", False)
    if "groups" in status:
        meta["groups"] = status["groups"]
    return meta


@register("snapshot", Access.READ,
          "Collect a diagnostic snapshot of the server (a ZIP made by the server). Returns the "
          "files it contains with their sizes and the beginning of each text file.",
          SnapshotArgs)
async def snapshot(ctx: Context, a: SnapshotArgs) -> dict[str, Any]:
    data = await ctx.client.get_snapshot(
        _COMPRESSION_CODES[a.compression], [_SNAPSHOT_CODES[t] for t in a.types])
    return {"zip_bytes": len(data), "files": _zip_entries(data)}


def _zip_entries(data: bytes) -> list[dict[str, Any]]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        return []
    entries = []
    for info in archive.infolist():
        head = archive.open(info).read(SNAPSHOT_TEXT_PREVIEW_BYTES)
        entry: dict[str, Any] = {"name": info.filename, "size_bytes": info.file_size}
        try:
            entry["preview"] = head.decode()
        except UnicodeDecodeError:
            pass
        entries.append(entry)
    return entries
