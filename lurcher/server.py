"""``lurcher-server``: configuration, the shard, the listeners, signals.

Start order: load configuration, open the metadata and partitions (recovery), create the
root user on first start, bind listeners, then write ``<system.path>/runtime/endpoints.json``
(the bound addresses, atomically) and log "ready". SIGTERM/SIGINT close listeners, send
every client a Disconnected frame, close partitions and exit 0. With
``system.sharding.shards`` > 1 the process becomes a supervisor
(``lurcher.runtime.supervisor``) running one shard process per shard.

The configuration is loaded and decoded once (``lurcher.runtime.config``); everything is
started from its typed sections (``config.typed``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import resource
import signal
import sys
from pathlib import Path
from typing import Any

from lurcher import datadir, logsetup
from lurcher.auth.passwords import UnusableHashing
from lurcher.auth.root import ensure_root
from lurcher.auth.session import number_clients_for_shard
from lurcher.core.allocator import return_large_buffers_to_the_kernel
from lurcher.core.event_loop import loop_factory
from lurcher.core.idle_poll import for_loop
from lurcher.core.log.host_memory import window_line
from lurcher.core.meta.store import MetaLogCorrupt, MetaReplica
from lurcher.core.shard import background
from lurcher.core.shard.cluster import Cluster
from lurcher.core.shard.shard import Shard
from lurcher.core.wire.errors import IggyError
from lurcher.runtime.config import Config, ConfigError, load_config
from lurcher.runtime.heap import freeze_startup_objects
from lurcher.transports.admission import binary_connections
from lurcher.transports.connection import StreamConnection
from lurcher.transports.frontend import FrontEnd, FrontEndRefused, ListenContext, Listener
from lurcher.transports.http.metrics import observe_commands
from lurcher.transports.tls import TlsConfigError

log = logging.getLogger("lurcher.server")

UNBUILT_TRANSPORTS: tuple[str, ...] = ()


HELP_EPILOG = """\
configuration (later sources override earlier ones):
  1. the packaged defaults (lurcher/configs/server.toml, every key with a comment)
  2. the TOML file given with --config, or else the one named by LURCHER_CONFIG_PATH
  3. environment variables LURCHER_<SECTION>_<KEY>: the key's dotted path joined with '_'
     and upper-cased, e.g. LURCHER_TCP_ADDRESS=0.0.0.0:8090 for [tcp] address,
     LURCHER_SYSTEM_SEGMENT_SIZE="256 MiB" for [system.segment] size
  Unknown keys and bad values are refused at start (exit status 2).
  LURCHER_ROOT_USERNAME / LURCHER_ROOT_PASSWORD set the root user on the first start only.

data: everything lives under system.path (default ./local_data, resolved against the
  working directory and logged at start): state/ (metadata log), streams/ (segments),
  runtime/ (endpoints.json and pid files while running), certs/, lurcher.lock (one server
  per directory).
"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="lurcher-server", epilog=HELP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Persistent message streaming server (Iggy 0.8 wire protocol)")
    parser.add_argument("--config", help="TOML file overriding the packaged defaults "
                        "(also LURCHER_CONFIG_PATH)")
    parser.add_argument("--with-default-root-credentials", action="store_true",
                        help="on first start, create the root user iggy/iggy")
    return parser.parse_args(argv)


def check_transports(config: Config) -> None:
    for name in UNBUILT_TRANSPORTS:
        if getattr(config.typed, name).enabled:
            raise ConfigError(f"{name}.enabled = true, but the {name} front end is not "
                              f"available in this version; set it to false")


def raise_open_files_limit() -> None:
    """Raise the soft RLIMIT_NOFILE to the hard limit (inherited by shard processes)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        log.info("open files limit: %d (soft = hard)", soft)
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:
        log.warning("open files limit stays %d (raising to %d failed: %s)", soft, hard, exc)
        return
    log.info("open files limit raised from %d to the hard limit %d", soft, hard)


# Every front end, in start order: (name = configuration section and endpoint key, module
# with ``listen``, whether every shard process listens or shard 0 only).
FRONT_ENDS: tuple[FrontEnd, ...] = (
    FrontEnd("tcp", "lurcher.transports.tcp", every_shard=True),
    FrontEnd("websocket", "lurcher.transports.websocket", every_shard=True),
    FrontEnd("quic", "lurcher.transports.quic", every_shard=False),
    FrontEnd("http", "lurcher.transports.http.server", every_shard=False),
    FrontEnd("unix", "lurcher.transports.unix", every_shard=False),
)


async def start_listeners(shard: Shard, config: Config) -> list[Listener]:
    """Bind every enabled front end and record its address in ``shard.endpoints``.
    With several shards, every shard listens for TCP and WebSocket on the shared addresses
    (SO_REUSEPORT); QUIC and HTTP run on shard 0.

    Raises OSError (address in use, ...) or TlsConfigError."""
    context = ListenContext(shard.data_path, reuse_port=shard.shards_count > 1,
                            connection_cap=shard.connection_cap)
    listeners: list[Listener] = []
    for front_end in FRONT_ENDS:
        section = getattr(config.typed, front_end.name)
        if not section.enabled or not (front_end.every_shard or shard.shard_id == 0):
            continue
        listener = await front_end.start(shard, section, context)
        listeners.append(listener)
        shard.endpoints[front_end.name] = listener.address
    return listeners


async def close_listeners(listeners: list[Listener]) -> None:
    """Wait until every (closed) listener has shut down, at most 5 s each."""
    for listener in listeners:
        try:
            await asyncio.wait_for(listener.wait_closed(), 5.0)
        except (asyncio.TimeoutError, OSError, RuntimeError) as exc:
            log.warning("listener did not close cleanly: %s", exc)


def open_shard(config: Config, default_root: bool, shard_id: int, shards_count: int) -> Shard:
    """The shard of this process; shard 0 owns the metadata and creates the root user."""
    number_clients_for_shard(shard_id, shards_count)
    shard = Shard(config, shard_id=shard_id, shards_count=shards_count,
                  meta=MetaReplica() if shard_id else None)
    shard.connection_cap = cap = binary_connections(config, shard_id)
    shard.connection_factory = lambda session, pending: StreamConnection(
        shard, session.transport, session, pending, cap=cap)
    observe_commands(shard, config.typed.http.metrics.enabled)
    if shard_id == 0:
        generated = ensure_root(shard.meta, shard.passwords.hash, os.environ, default_root,
                                shard.clock())
        if generated:
            print(f"Generated root password (shown once): {generated}", flush=True)
    return shard


async def serve(config: Config, default_root: bool, shard_id: int = 0, shards_count: int = 1,
                namespace: str = "", ready: Any = None, heartbeat: Any = None) -> None:
    """Run one shard until SIGTERM/SIGINT. With several shards ``ready`` (a queue) receives
    ``(shard_id, endpoints)`` instead of this process writing endpoints.json, and the event
    loop stamps ``heartbeat`` (a shared value the supervisor watches)."""
    shard = open_shard(config, default_root, shard_id, shards_count)
    if shards_count > 1:
        cluster = Cluster(shard, namespace, config.typed.tcp.socket_migration)
        shard.cluster = shard.dispatcher.cluster = cluster
        await cluster.start()
    clustering = config.typed.cluster
    if shard_id == 0 and clustering.enabled:  # before the listeners: changes are replicated
        from lurcher.cluster.metadata import start_node
        await start_node(clustering, shard)
    shard.dispatcher.poll_between_requests(for_loop(asyncio.get_running_loop()),
                                           config.typed.system.idle_poll / 1e6)
    listeners = await start_listeners(shard, config)
    jobs = background.start(shard)
    if heartbeat is not None:
        from lurcher.runtime.supervisor import beat
        interval = config.typed.system.sharding.heartbeat_interval / 1e6
        jobs.append(asyncio.ensure_future(beat(heartbeat, interval)))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # before anyone is told the shard is ready:
        loop.add_signal_handler(sig, stop.set)   # a SIGTERM right after it stops it cleanly
    freeze_startup_objects()  # before anyone is told the shard is ready: a collection first
    datadir.write_pid_file(shard.data_path, shard_id)
    if ready is None:
        datadir.write_endpoints(shard.data_path, shard.endpoints)
    else:
        ready.put((shard_id, dict(shard.endpoints)))
    log.info("shard %d ready: %s", shard_id,
             " ".join(f"{k}={v}" for k, v in shard.endpoints.items()))
    await stop.wait()
    log.info("stopping")
    for job in jobs:
        job.cancel()
    for listener in listeners:
        listener.close()
    shard.close()
    if shard.cluster is not None:
        await shard.cluster.close()
    if shard.cluster_node is not None:
        await shard.cluster_node.close()
    await asyncio.sleep(0.05)
    await close_listeners(listeners)
    datadir.remove_runtime_file(shard.data_path, datadir.pid_file_name(shard_id))
    if ready is None:
        datadir.remove_runtime_file(shard.data_path, datadir.ENDPOINTS_FILE)


def configure_logging(config: Config, rotate: bool = True) -> None:
    settings = config.typed.system.logging
    logsetup.configure(settings, Path(config.typed.system.path), settings.max_size, rotate)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        config = load_config(args.config)
        check_transports(config)
        os.umask(file_umask(config))  # inherited by every shard process
    except ConfigError as exc:
        print(f"lurcher-server: configuration error: {exc}", file=sys.stderr)
        return 2
    data_path = datadir.resolve(config.typed.system.path)
    config = config.merged({"system": {"path": str(data_path)}})
    try:
        lock_fd = datadir.lock(data_path)
        configure_logging(config)
    except (datadir.DataDirInUse, OSError) as exc:
        print(f"lurcher-server: cannot start: {exc}", file=sys.stderr)
        return 1
    raise_open_files_limit()
    return_large_buffers_to_the_kernel()
    log.info("data directory %s (pid %d)", data_path, os.getpid())
    log.info("%s", window_line(config.typed.system.segment.page_cache_window))
    shards = config.shards_count()
    try:
        if shards > 1:
            from lurcher.runtime.supervisor import supervise
            return supervise(config, args.with_default_root_credentials, shards)
        return run_shard(config, args.with_default_root_credentials)
    finally:
        os.close(lock_fd)


def file_umask(config: Config) -> int:
    """``system.umask`` (octal text, default "077": data files 0600, directories 0700); one
    that masks the owner's bits is refused: the files it made could not be opened again by
    a server not running as root. Raises ConfigError."""
    text = config.typed.system.umask
    try:
        mask = int(text, 8)
    except ValueError:
        raise ConfigError(f"system.umask: not an octal mask: {text!r}") from None
    if not 0 <= mask <= 0o777:
        raise ConfigError(f"system.umask: {text!r} outside 000..777")
    if mask & 0o700:
        raise ConfigError(f"system.umask: {text!r} takes the owner's own permissions away "
                          f"(its first digit must be 0: the server reopens its files)")
    return mask


def run_shard(config: Config, default_root: bool, shard_id: int = 0, shards: int = 1,
              namespace: str = "", ready: Any = None, heartbeat: Any = None) -> int:
    """Run one shard on its own event loop; the process exit code."""
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            runner.run(serve(config, default_root, shard_id, shards, namespace, ready,
                             heartbeat))
    except (OSError, TlsConfigError, MetaLogCorrupt, IggyError, UnusableHashing,
            FrontEndRefused) as exc:
        log.error("cannot start: %s", exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
