"""The tool table and what every tool module shares.

A tool is a ``ToolSpec``: its name (Iggy's MCP tool names), the ``Access`` the permission gate
checks, a description an agent can act on, an ``Args`` struct (its JSON schema is the tool's
input schema, and arguments are converted into it before anything is sent), and ``run``,
which takes the ``Context`` and the typed arguments and returns a JSON object.

``register`` adds a spec to ``TOOLS``; names are unique (asserted at import).

Argument types carry their wire bounds, so out-of-range values are refused as invalid
arguments before anything is encoded: ``U32``/``U64`` integers (msgspec cannot check a bound
above int64, so ``U64``'s maximum is checked by ``Args.__post_init__``, as is the UTF-8 length
of ``WireText`` names, ids and passwords: at most 255 bytes).
"""

from __future__ import annotations

import functools
import re
import types as pytypes
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Protocol, Union, get_args, get_origin

import msgspec
import mcp_types as types

from lurcher.core.wire.buffer import U128_MAX
from lurcher.core.wire.codec import U32
from lurcher.core.wire.values.consumer import Consumer
from lurcher.mcp_server.config import LimitsConfig
from lurcher.mcp_server.gate import Access
from lurcher.sdk import Client
from lurcher.core.wire.units import U64_MAX, decimal, limit_bytes, limit_us, shown

NAME_MAX_BYTES = 255  # names, string ids and passwords have a u8 length on the wire
_MAX_INT = "max_int"  # msgspec.Meta ``extra`` keys checked by Args.__post_init__
_MAX_UTF8 = "max_utf8_bytes"


class Context(Protocol):
    """What a tool may use: the SDK client, the limits and the configured consumer."""

    client: Client
    limits: LimitsConfig
    consumer_name: str


class Args(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Base of tool arguments; unknown argument names are refused (typos do not pass)."""

    def __post_init__(self) -> None:
        """Check the bounds msgspec cannot (ValueError becomes a msgspec ValidationError)."""
        for name, limits in _field_limits(type(self)):
            problem = limit_problem(getattr(self, name), limits)
            if problem:
                raise ValueError(f"{problem} - at `$.{name}`")


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

U64 = Annotated[int, msgspec.Meta(ge=0, extra_json_schema={"maximum": U64_MAX},
                                  extra={_MAX_INT: U64_MAX})]
WireText = Annotated[str, msgspec.Meta(min_length=1, max_length=NAME_MAX_BYTES,
                                       extra={_MAX_UTF8: NAME_MAX_BYTES})]


def _ident(what: str) -> Any:
    return Annotated[U32 | WireText, msgspec.Meta(description=(
        f"{what}: its numeric id or its name (an all-digit string is an id; names are at "
        f"most {NAME_MAX_BYTES} bytes as UTF-8)."))]


def _extras(tp: Any) -> dict[str, Any]:
    """The ``extra`` of every msgspec.Meta in the type ``tp`` (through Annotated and unions)."""
    if get_origin(tp) is Annotated:
        found = {k: v for m in tp.__metadata__ if isinstance(m, msgspec.Meta) and m.extra
                 for k, v in m.extra.items()}
        return _extras(tp.__origin__) | found
    if get_origin(tp) in (Union, pytypes.UnionType):
        return {k: v for arg in get_args(tp) for k, v in _extras(arg).items()}
    return {}


@functools.cache
def _field_limits(args: type[Args]) -> tuple[tuple[str, dict[str, Any]], ...]:
    fields = ((f.name, _extras(f.type)) for f in msgspec.structs.fields(args))
    return tuple((name, limits) for name, limits in fields if limits)


def limit_problem(value: Any, limits: dict[str, Any]) -> str | None:
    """What is wrong with ``value`` under the ``extra`` limits of its type, or None."""
    if isinstance(value, int) and _MAX_INT in limits and value > limits[_MAX_INT]:
        return f"Expected `int` <= {limits[_MAX_INT]}"
    if isinstance(value, str) and _MAX_UTF8 in limits:
        return text_problem(value, limits[_MAX_UTF8])
    return None


def text_problem(text: str, max_bytes: int = NAME_MAX_BYTES) -> str | None:
    """Why ``text`` cannot be a wire name (not UTF-8 encodable, or too long), or None."""
    try:
        size = len(text.encode())
    except UnicodeEncodeError:
        return "Expected text without lone surrogates (not encodable as UTF-8)"
    if size > max_bytes:
        return (f"Expected `str` of at most {max_bytes} bytes as UTF-8 "
                f"(names are at most {max_bytes} bytes), got {size} bytes")
    return None


StreamId = _ident("The stream")
TopicId = _ident("The topic")
GroupId = _ident("The consumer group")
UserId = _ident("The user")
PartitionId = Annotated[U32, msgspec.Meta(description="Partition id (0-based).")]
OptionalPartition = Annotated[U32 | None, msgspec.Meta(
    description="Partition id (0-based). Leave out when the server should choose.")]
Name = WireText
ConsumerName = Annotated[U32 | WireText | None, msgspec.Meta(description=(
    "Consumer (id or name) whose offsets are used; defaults to this MCP server's "
    "configured consumer."))]
Expiry = Annotated[U64 | str | None, msgspec.Meta(description=(
    "Message expiry: a duration like \"7d\", \"12h 30m\", \"90s\", an integer number of "
    "microseconds, or \"unlimited\". Leave out for the server default."))]
Size = Annotated[U64 | str | None, msgspec.Meta(description=(
    "Maximum topic size: bytes as an integer, a size like \"10 GB\" or \"512 MiB\", or "
    "\"unlimited\". Leave out for the server default."))]


def expiry_us(value: int | str | None) -> int:
    """Microseconds for an expiry argument: 0 = server default, U64_MAX = unlimited.

    Raises ArgumentError for text that is not a duration or one too long for u64 microseconds.
    """
    try:
        return limit_us(value)
    except (ValueError, OverflowError) as e:
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


_UUID_TEXT = re.compile(r"(urn:uuid:)?(\{)?[0-9a-f]{8}(-?[0-9a-f]{4}){3}-?[0-9a-f]{12}(?(2)\})",
                        re.IGNORECASE | re.ASCII)


def message_id(value: int | str | None) -> int | uuid.UUID:
    """A message id argument: an integer, a UUID string, a string of ASCII digits, or None
    (the server assigns one). Ids are u128: 0..2^128-1.

    Raises ArgumentError for other text and for numbers out of range.
    """
    if value is None:
        return 0
    number = _message_id_text(value) if isinstance(value, str) else value
    if isinstance(number, int) and not 0 <= number <= U128_MAX:
        raise ArgumentError(f"message id {number} is outside 0..2^128-1")
    return number


def _message_id_text(text: str) -> int | uuid.UUID:
    if _UUID_TEXT.fullmatch(text):
        return uuid.UUID(text)
    if not (text.isascii() and text.isdigit()):
        raise ArgumentError(f"message id {shown(text)} is neither an integer (ASCII digits) "
                            "nor a UUID")
    number = decimal(text, U128_MAX)
    if number is None:
        raise ArgumentError(f"message id {shown(text.lstrip('0'))} is outside 0..2^128-1")
    return number
