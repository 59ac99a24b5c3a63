"""The supervisor of a multi-shard server: starts one process per shard, restarts a shard
that dies or whose event loop stops answering, and stops them all on SIGTERM/SIGINT.

Liveness: every shard's event loop stamps ``time.monotonic()`` into a shared value of its own
every ``system.sharding.heartbeat_interval`` (``beat``); a shard whose stamp is older than
``heartbeat_timeout`` is killed with SIGKILL and restarted like a shard that died.

Before forking it reserves the TCP address (a bound, not listening SO_REUSEPORT socket), so
a port 0 in the configuration becomes one port every shard listens on and a restarted shard
gets the same one back. Shard 0 (the metadata owner) starts first; the others subscribe to
it. ``endpoints.json`` is written once every shard is ready.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import queue
import secrets
import signal
import time
from typing import Any

from lurcher import datadir
from lurcher.runtime.config import Config
from lurcher.core.shard.bus import reserve_socket
from lurcher.core.wire.address import split_address

log = logging.getLogger("lurcher.supervisor")

READY_TIMEOUT_S = 60.0
SHARED_LISTENERS = ("tcp", "websocket")  # every shard listens on these (SO_REUSEPORT)
RESTART_BACKOFF_S = 0.5
STOP_TIMEOUT_S = 20.0


def _shard_main(config: Config, default_root: bool, shard_id: int, shards: int,
                namespace: str, ready: Any, heartbeat: Any) -> None:
    from lurcher.server import configure_logging, run_shard
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor decides when to stop
    configure_logging(config, rotate=False)
    os._exit(run_shard(config, default_root, shard_id, shards, namespace, ready, heartbeat))


async def beat(heartbeat: Any, interval_s: float) -> None:
    """Shard side: stamp the heartbeat while the event loop runs (a background task)."""
    while True:
        heartbeat.value = time.monotonic()
        await asyncio.sleep(interval_s)


class Supervisor:
    def __init__(self, config: Config, default_root: bool, shards: int) -> None:
        self.config = config
        self.default_root = default_root
        self.shards = shards
        self.namespace = f"lurcher-{os.getpid()}-{secrets.token_hex(4)}"
        self.context = multiprocessing.get_context("fork")
        self.ready = self.context.Queue()
        self.processes: dict[int, Any] = {}
        self.endpoints: dict[int, dict[str, str]] = {}
        self.stopping = False
        self.restarts = 0
        self.heartbeats: dict[int, Any] = {}
        self.heartbeat_timeout_s = config.typed.system.sharding.heartbeat_timeout / 1e6

    def reserve(self, section: str) -> Any:
        """Fix ``<section>.address`` (resolving port 0) for every shard; the reserving socket."""
        host, port = split_address(getattr(self.config.typed, section).address)
        sock = reserve_socket((host, port))
        bound = sock.getsockname()[1]
        address = f"{host}:{bound}" if ":" not in host else f"[{host}]:{bound}"
        self.config = self.config.merged({section: {"address": address}})
        return sock

    def start_shard(self, shard_id: int) -> None:
        heartbeat = self.context.RawValue("d", time.monotonic())
        process = self.context.Process(
            target=_shard_main, name=f"lurcher-shard-{shard_id}", daemon=False,
            args=(self.config, self.default_root, shard_id, self.shards, self.namespace,
                  self.ready, heartbeat))
        process.start()
        self.processes[shard_id] = process
        self.heartbeats[shard_id] = heartbeat
        self.wait_ready({shard_id})
        heartbeat.value = max(heartbeat.value, time.monotonic())

    def unresponsive(self, shard_id: int) -> float | None:
        """Seconds since the shard's last heartbeat, when past the timeout; else None."""
        silent = time.monotonic() - self.heartbeats[shard_id].value
        return silent if silent > self.heartbeat_timeout_s else None

    def kill_if_frozen(self, shard_id: int, process: Any) -> None:
        silent = self.unresponsive(shard_id)
        if silent is None:
            return
        log.error("shard %d (pid %d) missed its heartbeat for %.1f s; killing it",
                  shard_id, process.pid, silent)
        process.kill()
        process.join(5.0)

    def wait_ready(self, waiting: set[int]) -> None:
        """Block until every shard in ``waiting`` reported ready. Raises RuntimeError."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while waiting:
            try:
                shard_id, endpoints = self.ready.get(timeout=0.2)
            except queue.Empty:
                dead = [i for i in waiting if not self.processes[i].is_alive()]
                if dead or time.monotonic() > deadline:
                    raise RuntimeError(f"shard(s) {sorted(waiting)} failed to start")
                continue
            self.endpoints[shard_id] = endpoints
            waiting.discard(shard_id)

    def merged_endpoints(self) -> dict[str, str]:
        return dict(self.endpoints.get(0, {}))

    def watch(self) -> None:
        """Restart shards that die until asked to stop."""
        while not self.stopping:
            time.sleep(0.2)
            for shard_id, process in list(self.processes.items()):
                if not self.stopping and process.is_alive():
                    self.kill_if_frozen(shard_id, process)
                if self.stopping or process.is_alive():
                    continue
                log.error("shard %d exited with %s; restarting it", shard_id, process.exitcode)
                self.restarts += 1
                time.sleep(RESTART_BACKOFF_S)
                try:
                    self.start_shard(shard_id)
                    log.warning("shard %d restarted (pid %d, restart #%d)", shard_id,
                                self.processes[shard_id].pid, self.restarts)
                except RuntimeError as exc:
                    log.error("%s", exc)

    def stop(self) -> int:
        self.stopping = True
        for process in self.processes.values():
            if process.is_alive():
                os.kill(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        code = 0
        for shard_id, process in self.processes.items():
            process.join(max(deadline - time.monotonic(), 0.1))
            if process.is_alive():
                log.error("shard %d did not stop in time; killing it", shard_id)
                process.kill()
                process.join()
                code = 1
        return code


def supervise(config: Config, default_root: bool, shards: int) -> int:
    """Run ``shards`` shard processes until SIGTERM/SIGINT; the exit code."""
    supervisor = Supervisor(config, default_root, shards)
    reserved = [supervisor.reserve(section) for section in SHARED_LISTENERS
                if getattr(config.typed, section).enabled]
    signal.signal(signal.SIGTERM, lambda *_: setattr(supervisor, "stopping", True))
    signal.signal(signal.SIGINT, lambda *_: setattr(supervisor, "stopping", True))
    try:
        supervisor.start_shard(0)
        for shard_id in range(1, shards):
            supervisor.start_shard(shard_id)
    except RuntimeError as exc:
        log.error("cannot start: %s", exc)
        supervisor.stop()
        return 1
    endpoints = supervisor.merged_endpoints()
    data_path = datadir.resolve(config.typed.system.path)
    datadir.write_endpoints(data_path, endpoints)
    log.info("lurcher-server ready with %d shards: %s", shards,
             " ".join(f"{k}={v}" for k, v in endpoints.items()))
    supervisor.watch()
    log.info("stopping %d shards", shards)
    code = supervisor.stop()
    for sock in reserved:
        sock.close()
    datadir.remove_runtime_file(data_path, datadir.ENDPOINTS_FILE)
    return code
