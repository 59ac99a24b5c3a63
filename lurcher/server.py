"""``lurcher-server``: configuration, the shard, the listeners, signals.

Start order: load configuration, open the metadata and partitions (recovery), create the
root user on first start, bind listeners, then write ``<system.path>/runtime/endpoints.json``
(the bound addresses, atomically) and log "ready". SIGTERM/SIGINT close listeners, send
every client a Disconnected frame, close partitions and exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from lurcher.auth.root import ensure_root
from lurcher.config import Config, ConfigError, load_config
from lurcher.core.shard import background
from lurcher.core.shard.shard import Shard
from lurcher.transports.tcp import bound_address, start_tcp
from lurcher.transports.tls import TlsConfigError, server_context

log = logging.getLogger("lurcher.server")

UNBUILT_TRANSPORTS: tuple[str, ...] = ()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="lurcher-server",
                                     description="Persistent message streaming server (Iggy 0.8 wire protocol)")
    parser.add_argument("--config", help="TOML file overriding the packaged defaults "
                        "(also LURCHER_CONFIG_PATH)")
    parser.add_argument("--with-default-root-credentials", action="store_true",
                        help="on first start, create the root user iggy/iggy")
    return parser.parse_args(argv)


def write_endpoints(data_path: Path, endpoints: dict[str, str]) -> None:
    runtime = data_path / "runtime"
    runtime.mkdir(parents=True, exist_ok=True)
    tmp = runtime / "endpoints.json.tmp"
    tmp.write_text(json.dumps(endpoints))
    os.replace(tmp, runtime / "endpoints.json")


def check_transports(config: Config) -> None:
    for name in UNBUILT_TRANSPORTS:
        if config.get(f"{name}.enabled"):
            raise ConfigError(f"{name}.enabled = true, but the {name} front end is not "
                              f"available in this version; set it to false")


def _tls(config: Config, section: str, data_path: Path) -> Any:
    """The server SSL context of ``[<section>]`` when enabled, else None."""
    tls = config.get(section) or {}
    return server_context(tls, data_path) if tls.get("enabled") else None


async def start_listeners(shard: Shard, config: Config) -> list[Any]:
    """Bind every enabled front end and record its address in ``shard.endpoints``.

    Raises OSError (address in use, ...) or TlsConfigError."""
    listeners: list[Any] = []
    data_path = shard.data_path
    if config["tcp.enabled"]:
        tcp = await start_tcp(shard, config["tcp.address"], _tls(config, "tcp.tls", data_path))
        listeners.append(tcp)
        shard.endpoints["tcp"] = bound_address(tcp)
    if config.get("websocket.enabled"):
        from lurcher.transports.websocket import start_websocket, websocket_address
        ws = await start_websocket(shard, config["websocket.address"], config["websocket"],
                                   _tls(config, "websocket.tls", data_path))
        listeners.append(ws)
        shard.endpoints["websocket"] = websocket_address(ws)
    if config.get("quic.enabled"):
        from lurcher.transports.quic import quic_address, start_quic
        quic = await start_quic(shard, config["quic.address"], config["quic"], data_path)
        listeners.append(quic)
        shard.endpoints["quic"] = quic_address(quic)
    if config.get("http.enabled"):
        from lurcher.transports.http.server import start_http
        http = await start_http(shard, config["http"], data_path)
        listeners.append(http)
        shard.endpoints["http"] = http.address
    return listeners


async def close_listeners(listeners: list[Any]) -> None:
    """Wait for listeners that shut down asynchronously (WebSocket, HTTP)."""
    for listener in listeners:
        wait = getattr(listener, "wait_closed", None)
        if wait is None:
            continue
        try:
            await asyncio.wait_for(wait(), 5.0)
        except (asyncio.TimeoutError, OSError, RuntimeError) as exc:
            log.warning("listener did not close cleanly: %s", exc)


async def serve(config: Config, default_root: bool) -> None:
    shard = Shard(config)
    generated = ensure_root(shard.meta, shard.passwords.hash, os.environ, default_root,
                            shard.clock())
    if generated:
        print(f"Generated root password (shown once): {generated}", flush=True)
    listeners = await start_listeners(shard, config)
    jobs = background.start(shard)
    write_endpoints(shard.data_path, shard.endpoints)
    log.info("lurcher-server ready: %s", " ".join(f"{k}={v}" for k, v in shard.endpoints.items()))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("stopping")
    for job in jobs:
        job.cancel()
    for listener in listeners:
        listener.close()
    shard.close()
    await asyncio.sleep(0.05)
    await close_listeners(listeners)


def configure_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def loop_factory():
    """uvloop's loop when installed, else asyncio's default."""
    try:
        import uvloop
    except ImportError:
        log.info("uvloop not available; using the default asyncio loop")
        return None
    return uvloop.new_event_loop


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        config = load_config(args.config)
        check_transports(config)
    except ConfigError as exc:
        print(f"lurcher-server: configuration error: {exc}", file=sys.stderr)
        return 2
    configure_logging(config.get("system.logging.level", "info"))
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            runner.run(serve(config, args.with_default_root_credentials))
    except (OSError, TlsConfigError) as exc:
        log.error("cannot start: %s", exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
