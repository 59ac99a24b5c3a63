"""Every MCP tool, one module per command family; importing this package fills ``TOOLS``."""

from lurcher.mcp_server.tools import groups, messages, streams, system, users  # noqa: F401
from lurcher.mcp_server.tools.base import TOOLS, ArgumentError, ToolSpec, parse_args

__all__ = ["TOOLS", "ArgumentError", "ToolSpec", "parse_args"]
