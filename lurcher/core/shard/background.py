"""Periodic jobs of a shard (expiry cleaner, token cleanup, heartbeat checks, ...).

A job is ``Job(name, interval_us, run)`` where ``run(shard, now_us)`` is quick (it may
schedule threads itself); it may return an awaitable (to ask other shards first), which the
job's loop awaits before the next run. ``JOBS`` is filled by ``register`` from the modules
that own the work; ``start(shard)`` runs every enabled job on the shard's event loop and
returns the tasks so the server can cancel them on shutdown. A failing run is logged and
the job keeps its schedule.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
from dataclasses import dataclass
from typing import Any, Callable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Job:
    name: str
    interval_us: Callable[[Any], int | None]  # from the shard's config; None = disabled
    run: Callable[[Any, int], None]
    # runs on shard 0 only, and not on a cluster node (it records metadata events)
    metadata_owner_only: bool = False


JOBS: list[Job] = []

# Modules whose import registers jobs (add yours here).
JOB_MODULES: tuple[str, ...] = ("lurcher.core.shard.handlers.tokens",
                               "lurcher.core.shard.maintenance")


def register(name: str, interval_us: Callable[[Any], int | None],
             metadata_owner_only: bool = False):
    """Decorator: run the decorated ``fn(shard, now_us)`` every ``interval_us(shard)``."""
    def add(fn: Callable[[Any, int], None]) -> Callable[[Any, int], None]:
        JOBS.append(Job(name, interval_us, fn, metadata_owner_only))
        return fn
    return add


async def _loop(shard: Any, job: Job, interval_us: int) -> None:
    while True:
        await asyncio.sleep(interval_us / 1e6)
        try:
            done = job.run(shard, shard.clock())
            if inspect.isawaitable(done):
                await done
        except Exception:
            log.exception("background job %s failed", job.name)


def start(shard: Any) -> list[asyncio.Task]:
    """Start every enabled job; returns their tasks."""
    for module in JOB_MODULES:
        importlib.import_module(module)
    tasks = []
    for job in JOBS:
        if job.metadata_owner_only and not shard.is_metadata_owner:
            continue
        if job.metadata_owner_only and shard.cluster_node is not None:
            # its events would change this node's metadata alone (not through the group)
            log.info("background job %s does not run on a cluster node", job.name)
            continue
        interval = job.interval_us(shard)
        if interval:
            tasks.append(asyncio.create_task(_loop(shard, job, interval), name=job.name))
    return tasks
