"""``lurcher-mcp`` / ``python -m lurcher.mcp_server``: load the configuration, then serve MCP
over stdio or streamable HTTP until stdin closes or SIGINT/SIGTERM arrives.

Nothing but MCP messages is ever written to stdout (stdio transport); logs and the startup
line (``lurcher-mcp: serving MCP over http at <url>``) go to stderr. Exit status 2 means a
configuration error.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

import msgspec

from lurcher.core.event_loop import loop_factory
from lurcher.core.wire.errors import IggyError
from lurcher.mcp_server.config import MCP_TRANSPORTS, ConfigError, McpConfig, load_config
from lurcher.mcp_server.http_app import serve_http
from lurcher.mcp_server.service import Backend, build_server

log = logging.getLogger("lurcher.mcp_server")
CONFIG_ERROR_EXIT = 2


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="lurcher-mcp", description=(
        "MCP server for lurcher: tools and resources for LLM agents. Configured by a TOML "
        "file and LURCHER_MCP_* environment variables."))
    p.add_argument("--config", help="TOML configuration file (else LURCHER_MCP_CONFIG_PATH)")
    p.add_argument("--transport", choices=MCP_TRANSPORTS, help="override `transport`")
    return p.parse_args(argv)


def announce(text: str) -> None:
    print(f"lurcher-mcp: {text}", file=sys.stderr, flush=True)


async def run(config: McpConfig) -> None:
    """Serve until done; the SDK client is closed on the way out."""
    backend = Backend(config)
    server = build_server(backend)
    target = config.iggy.connection_string.split("@")[-1] or config.iggy.address
    try:
        if config.transport == "stdio":
            from mcp.server.stdio import stdio_server
            announce(f"serving MCP over stdio (lurcher at {target})")
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
        else:
            await serve_http(server, config.http, lambda url: announce(
                f"serving MCP over http at {url} (lurcher at {target})"))
    finally:
        await backend.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(args.config)
        if args.transport:
            config = msgspec.structs.replace(config, transport=args.transport).validate()
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            runner.run(run(config))
    except (ConfigError, IggyError, OSError) as e:
        announce(f"cannot start: {e}")
        return CONFIG_ERROR_EXIT
    except KeyboardInterrupt:
        pass
    return 0
