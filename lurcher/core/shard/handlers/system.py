"""System commands: ping, stats, cluster metadata, clients (me, one, all), snapshot.

GetStats follows the 0.8 server: process figures (pid, cpu %, RSS, OS thread count, disk
bytes read/written by the process), whole-machine cpu % and memory, run and start time in
µs, counts of streams/topics/partitions/groups from metadata, segments/messages/bytes summed
over the partitions (live counters, so retention shows at once), connected clients, and the
free/total space of the file system holding ``system.path``. Only Ping refreshes a client's
heartbeat (as in 0.8). The process and machine figures are read from ``/proc``: when they
cannot be (descriptors used up) they are 0, logged in one line, and the rest still answers.
"""

from __future__ import annotations

from typing import Any

import asyncio
import logging
import os
import platform
import shutil
import socket

import psutil

from lurcher.cluster.metadata import describe_shard
from lurcher.core.shard.handlers.registry import handles
from lurcher.auth.session import Session
from lurcher.core.shard.face import ShardFace
from lurcher.core.wire.requests.system.get_snapshot_file import GetSnapshotFile
from lurcher.core.wire.requests.system.get_client import GetClient
from lurcher.core.wire.requests.system.get_clients import GetClients
from lurcher.core.wire.requests.system.get_cluster_metadata import GetClusterMetadata
from lurcher.core.wire.requests.system.get_me import GetMe
from lurcher.core.wire.requests.system.get_stats import GetStats
from lurcher.core.wire.requests.system.ping import Ping
from lurcher.core.shard.snapshot import build_snapshot, zip_method
from lurcher.core.wire.responses.clients import ClientDetails, ClientGroup, ClientHeader
from lurcher.core.wire.responses.cluster import ClusterMetadata, ClusterNode
from lurcher.core.wire.responses.snapshot import SnapshotFile
from lurcher.core.wire.responses.stats import Stats

SERVER_VERSION = "0.8.0"
SERVER_SEMVER = 8000
NOT_LOGGED_IN = 0xFFFF_FFFF
_process = psutil.Process()
log = logging.getLogger(__name__)


@handles("ping")
def ping(shard: ShardFace, session: Session, req: Ping) -> Any:
    session.last_seen_us = shard.clock()
    return None


def _port(shard: ShardFace, transport: str) -> int:
    address = shard.endpoints.get(transport)
    return int(address.rpartition(":")[2]) if address else 0


@handles("get_cluster_metadata")
def get_cluster_metadata(shard: ShardFace, session: Session, req: GetClusterMetadata) -> Any:
    """A single node, or the real nodes of an enabled ``[cluster]`` (``cluster.metadata``);
    routed to shard 0, which runs the cluster node."""
    if shard.cluster_node is not None:
        return describe_shard(shard)
    host = (shard.endpoints.get("tcp") or "127.0.0.1:0").rpartition(":")[0].strip("[]")
    node = ClusterNode("lurcher-node", host, _port(shard, "tcp"), _port(shard, "quic"),
                       _port(shard, "http"), _port(shard, "websocket"))
    return ClusterMetadata("single-node", [node])


@handles("get_snapshot_file")
async def get_snapshot_file(shard: ShardFace, session: Session, req: GetSnapshotFile) -> Any:
    """A ZIP of the requested diagnostics (``core.shard.snapshot``), built off the loop."""
    zip_method(req.compression)  # zstd: FEATURE_UNAVAILABLE before any work
    data = await asyncio.to_thread(build_snapshot, shard.data_path, shard.config,
                                   req.compression, list(req.snapshot_types))
    return SnapshotFile(data)


def client_details(shard: ShardFace, session: Session) -> ClientDetails:
    groups = [ClientGroup(*key) for key in shard.groups.joined_by(session.client_id)]
    user = NOT_LOGGED_IN if session.user_id is None else session.user_id
    header = ClientHeader(session.client_id, user, session.transport, session.address,
                          len(groups))
    return ClientDetails(header, groups)


@handles("get_me")
def get_me(shard: ShardFace, session: Session, req: GetMe) -> Any:
    return client_details(shard, session)


@handles("get_client")
def get_client(shard: ShardFace, session: Session, req: GetClient) -> Any:
    other = next((s for s in shard.all_sessions() if s.client_id == req.client_id), None)
    return None if other is None else client_details(shard, other)


@handles("get_clients")
def get_clients(shard: ShardFace, session: Session, req: GetClients) -> Any:
    sessions = sorted(shard.all_sessions(), key=lambda s: s.client_id)
    return [client_details(shard, s).header for s in sessions]


def _os_names(system: str) -> tuple[str, str]:
    """(name, long version) as the 0.8 server reports them, e.g. ("Ubuntu", "Linux 24.04
    Ubuntu"); the kernel name alone when the OS release file is missing."""
    try:
        release = platform.freedesktop_os_release()
    except OSError:
        return system, system
    name = release.get("NAME", system)
    return name, " ".join(x for x in (system, release.get("VERSION_ID", ""), name) if x)


_PROC_FIGURES = ("cpu_usage", "total_cpu_usage", "memory_usage_bytes", "total_memory_bytes",
                 "available_memory_bytes", "read_bytes", "written_bytes", "threads_count")


def _proc_figures() -> dict[str, Any]:
    """The Stats fields read from ``/proc``; all 0 (logged) when they cannot be read."""
    try:
        memory = psutil.virtual_memory()
        io = _process.io_counters() if hasattr(_process, "io_counters") else None
        return dict(
            cpu_usage=float(_process.cpu_percent(None)),
            total_cpu_usage=float(psutil.cpu_percent(None)),
            memory_usage_bytes=_process.memory_info().rss,
            total_memory_bytes=memory.total,
            available_memory_bytes=memory.available,
            read_bytes=io.read_bytes if io else 0,
            written_bytes=io.write_bytes if io else 0,
            threads_count=_process.num_threads())
    except OSError as exc:
        log.warning("stats: process and memory figures cannot be read now (%s): sent as 0", exc)
        return dict.fromkeys(_PROC_FIGURES, 0)


@handles("get_stats")
def get_stats(shard: ShardFace, session: Session, req: GetStats) -> Any:
    state = shard.meta.state
    topics = list(state.topics())
    partitions = shard.all_partition_stats()
    disk = shutil.disk_usage(shard.data_path)
    uname = platform.uname()
    os_name, os_version = _os_names(uname.system)
    return Stats(
        process_id=os.getpid(),
        run_time_us=shard.clock() - shard.started_at_us,
        start_time_us=shard.started_at_us,
        messages_size_bytes=sum(p.size_bytes for p in partitions),
        streams_count=len(state.streams),
        topics_count=len(topics),
        partitions_count=len(partitions),
        segments_count=sum(p.segments_count for p in partitions),
        messages_count=sum(p.messages_count for p in partitions),
        clients_count=len(shard.all_sessions()),
        consumer_groups_count=sum(len(t.groups) for t in topics),
        hostname=socket.gethostname(),
        os_name=os_name,
        os_version=os_version,
        kernel_version=uname.release,
        iggy_server_version=SERVER_VERSION,
        iggy_server_semver=SERVER_SEMVER,
        cache_metrics=[],
        **_proc_figures(),
        free_disk_space_bytes=disk.free,
        total_disk_space_bytes=disk.total,
    )
