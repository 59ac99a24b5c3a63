"""lurcher.mcp_server: ``lurcher-mcp``, an MCP server that lets LLM agents work with lurcher.

A client of ``lurcher.sdk`` only. Modules: ``config`` (TOML + ``LURCHER_MCP_*``), ``gate``
(create/read/update/delete switches checked before any call is forwarded), ``tools`` (the
Iggy MCP tool set, one module per family), ``resources`` (``lurcher://`` documents),
``render`` (payloads, headers and size limits for a model), ``service`` (the MCP server
over one SDK client), ``http_app`` (streamable HTTP), ``cli`` (the entry point).
"""

from lurcher.mcp_server.config import ConfigError, McpConfig, load_config
from lurcher.mcp_server.service import Backend, build_server

__all__ = ["Backend", "ConfigError", "McpConfig", "build_server", "load_config"]
