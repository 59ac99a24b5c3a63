"""The tool table and what every tool module shares.

A tool is a ``ToolSpec``: its name (Iggy's MCP tool names), the ``Access`` the permission gate
checks, a description an agent can act on, an ``Args`` struct (its JSON schema is the tool's
input schema, and arguments are converted into it before anything is sent), and ``run``,
which takes the ``Context`` and the typed arguments and returns a JSON object.

``register`` adds a spec to ``TOOLS``; names are unique (asserted at import).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Protocol

import msgspec
import mcp_types as types

from lurcher.core.wire.values.consumer import Consumer
from lurcher.mcp_server.config import LimitsConfig
from lurcher.mcp_server.gate import Access
from lurcher.sdk import Client
from lurcher.core.wire.units import limit_bytes, limit_us



class Context(Protocol):
    """What a tool may use: the SDK client, the limits and the configured consumer."""

    client: Client
    limits: LimitsConfig
    consumer_name: str


class Args(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Base of tool arguments; unknown argument names are refused (typos do not pass)."""


class ArgumentError(ValueError):
    """Arguments that do not fit a tool's schema or rules; nothing was sent."""


Run = Callable[[Context, Any], Awaitable[dict[str, Any]]]


class ToolSpec(msgspec.Struct, frozen=True):
    name: str
    access: Access
    description: str
    args: type[Args]
    run: Run

    def tool(self) -> types.Tool:
        """The MCP tool definition (schema from ``args``, hints from ``access``)."""
        read_only = self.access == Access.READ
        return types.Tool(
            name=self.name, description=self.description, input_schema=input_schema(self.args),
            annotations=types.ToolAnnotations(
                read_only_hint=read_only, destructive_hint=self.access == Access.DELETE,
                idempotent_hint=read_only, open_world_hint=False))


TOOLS: dict[str, ToolSpec] = {}


def register(name: str, access: Access, description: str,
             args: type[Args]) -> Callable[[Run], Run]:
    """Decorator adding a tool to ``TOOLS``."""
    def add(run: Run) -> Run:
        assert name not in TOOLS, f"tool {name} registered twice"
        TOOLS[name] = ToolSpec(name, access, description, args, run)
        return run
    return add


def input_schema(args: type[Args]) -> dict[str, Any]:
    """The JSON schema of ``args`` with the root inlined (``type: object`` at the top)."""
    schema = msgspec.json.schema(args)
    defs = schema.get("$defs", {})
    root = dict(defs.pop(args.__name__, schema))
    root.pop("title", None)
    if defs:
        root["$defs"] = defs
    return root


def parse_args(args: type[Args], arguments: dict[str, Any]) -> Args:
    """``arguments`` converted to ``args``. Raises ArgumentError naming the bad field."""
    try:
        return msgspec.convert(arguments, args, strict=False)
    except msgspec.ValidationError as e:
        raise ArgumentError(f"invalid arguments: {e}") from None


def ok(action: str, **details: Any) -> dict[str, Any]:
    """The answer of a command that returns nothing: what was done, to what."""
    return {"ok": True, "action": action, **{k: v for k, v in details.items() if v is not None}}


# -- argument types -----------------------------------------------------------------------------

def _ident(what: str) -> Any:
    return Annotated[int | str, msgspec.Meta(
        description=f"{what}: its numeric id or its name (an all-digit string is an id).")]


StreamId = _ident("The stream")
TopicId = _ident("The topic")
GroupId = _ident("The consumer group")
UserId = _ident("The user")
PartitionId = Annotated[int, msgspec.Meta(ge=0, description="Partition id (0-based).")]
OptionalPartition = Annotated[int | None, msgspec.Meta(
    description="Partition id (0-based). Leave out when the server should choose.")]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=255)]
ConsumerName = Annotated[int | str | None, msgspec.Meta(description=(
    "Consumer (id or name) whose offsets are used; defaults to this MCP server's "
    "configured consumer."))]
Expiry = Annotated[int | str | None, msgspec.Meta(description=(
    "Message expiry: a duration like \"7d\", \"12h 30m\", \"90s\", an integer number of "
    "microseconds, or \"unlimited\". Leave out for the server default."))]
Size = Annotated[int | str | None, msgspec.Meta(description=(
    "Maximum topic size: bytes as an integer, a size like \"10 GB\" or \"512 MiB\", or "
    "\"unlimited\". Leave out for the server default."))]


def expiry_us(value: int | str | None) -> int:
    """Microseconds for an expiry argument: 0 = server default, U64_MAX = unlimited.

    Raises ArgumentError for text that is not a duration.
    """
    try:
        return limit_us(value)
    except ValueError as e:
        raise ArgumentError(str(e)) from None


def size_bytes(value: int | str | None) -> int:
    """Bytes for a size argument: 0 = server default, U64_MAX = unlimited.

    Raises ArgumentError for text that is not a size.
    """
    try:
        return limit_bytes(value)
    except ValueError as e:
        raise ArgumentError(str(e)) from None


def consumer_of(ctx: Context, name: int | str | None, group: bool = False) -> Consumer:
    """The wire consumer for an optional argument (the configured consumer by default)."""
    return Consumer.of(ctx.consumer_name if name is None else name, group=group)


def message_id(value: int | str | None) -> int | uuid.UUID:
    """A message id argument: an integer, a UUID string, or None (the server assigns one).

    Raises ArgumentError for other text.
    """
    if value is None:
        return 0
    if isinstance(value, int):
        if not 0 <= value < 1 << 128:
            raise ArgumentError(f"message id {value} is outside 0..2^128-1")
        return value
    try:
        return uuid.UUID(value)
    except ValueError:
        if value.isdigit():
            return message_id(int(value))
        raise ArgumentError(f"message id {value!r} is neither an integer nor a UUID") from None
