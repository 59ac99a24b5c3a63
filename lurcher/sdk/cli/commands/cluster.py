"""``cluster status``: the node's view of its cluster, read with ``Client.get_cluster_status``
(lurcher's ``GET /cluster/status``). ``status_text`` is pure: a single node gives one line;
a cluster node gives its nodes (role, status), then each replication group (view, primary,
commit number) with the lag of each replica in ops ("?" where this node does not know it)."""

from __future__ import annotations

from typing import Any

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.sdk.cli.exitcodes import CliError, exit_code_for
from lurcher.sdk.cli.output import render_table
from lurcher.sdk.cli.runtime import Run

CLUSTERING_OFF = "clustering is off: this server is a single node"
UNKNOWN = "?"


def _lags(group: dict[str, Any]) -> str:
    parts = []
    for replica in group["replicas"]:
        lag = replica["lag_ops"]
        parts.append(f"{replica['node']}={UNKNOWN if lag is None else lag}")
    return " ".join(parts)


def status_text(status: dict[str, Any]) -> str:
    """What ``lurcher cluster status`` prints for ``status`` (the route's JSON)."""
    if not status.get("enabled"):
        return CLUSTERING_OFF
    nodes = render_table(("node", "ip", "tcp", "http", "role", "status"), [
        (n["name"] + (" *" if n["name"] == status["node"] else ""), n["ip"], n["tcp_port"],
         n["http_port"], n["role"], n["status"]) for n in status["nodes"]])
    groups = render_table(("group", "status", "view", "primary", "commit", "lag (ops)"), [
        (f"{g['group']} {g['name']}", g["status"], g["view"], g["primary"] or "-",
         g["commit"], _lags(g)) for g in status["groups"]])
    return "\n".join([f"cluster {status['cluster']}, as node {status['node']} (*) sees it",
                      "", nodes, "", groups])


async def cluster_status(run: Run) -> None:
    try:
        status = await (await run.client()).get_cluster_status()
    except IggyError as e:
        if e.code != ErrorCode.FEATURE_UNAVAILABLE or not e.detail:
            raise
        raise CliError(e.detail, exit_code_for(e.code), e.code) from None  # why: HTTP off
    if run.out.json:
        run.out.dump(status)
    else:
        run.out.write(status_text(status))
