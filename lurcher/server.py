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

from lurcher.auth.root import ensure_root
from lurcher.config import Config, ConfigError, load_config
from lurcher.core.shard.handlers.tokens import start_token_cleaner
from lurcher.core.shard import background
from lurcher.core.shard.shard import Shard
from lurcher.transports.tcp import bound_address, start_tcp

log = logging.getLogger("lurcher.server")

UNBUILT_TRANSPORTS = ("http", "quic", "websocket")


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


async def serve(config: Config, default_root: bool) -> None:
    shard = Shard(config)
    generated = ensure_root(shard.meta, shard.passwords.hash, os.environ, default_root,
                            shard.clock())
    if generated:
        print(f"Generated root password (shown once): {generated}", flush=True)
    listeners = []
    if config["tcp.enabled"]:
        tcp = await start_tcp(shard, config["tcp.address"])
        listeners.append(tcp)
        shard.endpoints["tcp"] = bound_address(tcp)
    cleaner = start_token_cleaner(shard)
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
    if cleaner is not None:
        cleaner.cancel()
    for listener in listeners:
        listener.close()
    shard.close()
    await asyncio.sleep(0.05)


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
    except OSError as exc:
        log.error("cannot start: %s", exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
