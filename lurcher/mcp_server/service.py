"""``Backend`` (the SDK client, gate and limits behind every call) and ``build_server`` (the
MCP ``Server`` whose handlers list and call tools and read resources).

Invariants: a tool call either returns a result or a tool error (``is_error``) naming what
went wrong — the gate's refusal, bad arguments, the Iggy error the server answered with, or
an unexpected exception — it never raises into the MCP runtime. The gate is checked, and the
arguments converted, before anything is sent to lurcher. One SDK ``Client`` serves every MCP
session; it connects on the first call and reconnects by itself.
"""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from lurcher.core.wire.errors import IggyError
from lurcher.mcp_server import resources
from lurcher.mcp_server.config import McpConfig, resolve_token
from lurcher.mcp_server.gate import Access, Gate, GateRefused
from lurcher.mcp_server.render import dumps, fit
from lurcher.mcp_server.tools import TOOLS, ArgumentError, parse_args
from lurcher.sdk import Client

log = logging.getLogger("lurcher.mcp_server")

SERVER_NAME = "lurcher-mcp"
VERSION = "0.1.0"
RECONNECTION_RETRIES = 3
REQUEST_TIMEOUT_S = 60.0
INSTRUCTIONS = (
    "Tools and resources for a lurcher (Apache Iggy 0.8 compatible) message streaming server. "
    "Data is organised as streams > topics > partitions > messages (offsets from 0). Start "
    "with the lurcher://streams resource or get_streams, then get_topic for partitions and "
    "offsets; poll_messages reads messages (payloads decoded, limited in count and bytes, "
    "next_offset says where to continue). Identifiers accept a numeric id or a name.")


def make_client(config: McpConfig) -> Client:
    """The SDK client for ``config.iggy`` (not connected yet). Raises ConfigError for an
    unreadable token file, IggyError for a bad connection string."""
    i = config.iggy
    if i.connection_string:
        return Client.from_connection_string(i.connection_string)
    credentials: dict[str, Any] = (
        {"token": resolve_token(i.token)} if i.token
        else {"username": i.username, "password": i.password})
    return Client(
        i.address, transport=i.transport, tls=i.tls.enabled,
        tls_ca_file=i.tls.ca_file or None, tls_domain=i.tls.domain or None,
        reconnection_retries=RECONNECTION_RETRIES, request_timeout_s=REQUEST_TIMEOUT_S,
        **credentials)


class Backend:
    """The ``Context`` of tools: one SDK client, the limits, the gate, the consumer name."""

    def __init__(self, config: McpConfig, client: Client | None = None) -> None:
        self.config = config
        self.limits = config.limits
        self.gate = Gate(config.permissions)
        self.consumer_name = config.iggy.consumer or SERVER_NAME
        self.client = client or make_client(config)

    async def close(self) -> None:
        await self.client.close()

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Run one tool; every failure becomes a tool error result."""
        spec = TOOLS.get(name)
        if spec is None:
            return tool_error(f"unknown tool {name!r}", {"kind": "unknown_tool"})
        try:
            self.gate.check(spec.access, f"the {name} call")
            args = parse_args(spec.args, arguments)
            value = await spec.run(self, args)
        except GateRefused as e:
            return tool_error(str(e), {"kind": "permission_gate", "access": str(e.access)})
        except ArgumentError as e:
            return tool_error(str(e), {"kind": "invalid_arguments"})
        except IggyError as e:
            return tool_error(*describe_iggy_error(e, f"the {name} call"))
        except Exception as e:  # a bug or an unexpected failure: report it, keep serving
            log.exception("tool %s failed", name)
            return tool_error(f"{name} failed unexpectedly: {type(e).__name__}: {e}",
                              {"kind": "internal_error"})
        return tool_result(fit(value, self.limits.max_response_bytes))

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        """Raises MCPError (refused, unknown URI, not found, or the Iggy error)."""
        try:
            self.gate.check(Access.READ, f"reading {uri}")
            document = await resources.read(self, uri)
        except GateRefused as e:
            raise MCPError(types.INVALID_REQUEST, str(e)) from None
        except resources.ResourceError as e:
            raise MCPError(e.code, str(e)) from None
        except IggyError as e:
            message, data = describe_iggy_error(e, f"reading {uri}")
            raise MCPError(types.INTERNAL_ERROR, message, data) from None
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=uri, mime_type=resources.JSON, text=dumps(document))])

    async def list_resources(self) -> types.ListResourcesResult:
        """Raises MCPError when refused by the gate or when the server fails."""
        try:
            self.gate.check(Access.READ, "listing resources")
            return types.ListResourcesResult(resources=await resources.list_resources(self))
        except GateRefused as e:
            raise MCPError(types.INVALID_REQUEST, str(e)) from None
        except IggyError as e:
            message, data = describe_iggy_error(e, "listing resources")
            raise MCPError(types.INTERNAL_ERROR, message, data) from None


def describe_iggy_error(e: IggyError, what: str) -> tuple[str, dict[str, Any]]:
    """A message naming the Iggy error, and its structured form."""
    code = e.code
    message = (f"{what} failed with Iggy error {code.iggy_name} ({e.status}, "
               f"{code.snake_name}): {code.reason}")
    if e.detail:
        message += f" [{e.detail}]"
    return message, {"kind": "iggy_error", "code": e.status, "name": code.iggy_name,
                     "snake_name": code.snake_name}


def tool_result(value: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=dumps(value))],
                                structured_content=value)


def tool_error(message: str, data: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)],
                                structured_content={"error": message, **data}, is_error=True)


def build_server(backend: Backend) -> Server:
    """The MCP server: tools, resources and resource templates over ``backend``."""
    tool_list = [spec.tool() for spec in TOOLS.values()]

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list)

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await backend.call_tool(params.name, params.arguments or {})

    async def on_list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return await backend.list_resources()

    async def on_list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=resources.TEMPLATES)

    async def on_read_resource(ctx: Any,
                               params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        return await backend.read_resource(str(params.uri))

    return Server(
        SERVER_NAME, version=VERSION, instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools, on_call_tool=on_call_tool,
        on_list_resources=on_list_resources, on_list_resource_templates=on_list_templates,
        on_read_resource=on_read_resource)
