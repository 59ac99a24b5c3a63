"""What a model sees: wire values as plain JSON, message payloads and headers decoded, and
every answer held under the configured size limits.

Payloads: UTF-8 text that parses as a JSON object or array nested at most
``MAX_JSON_DEPTH`` deep is given as parsed JSON (``payload_encoding: "json"``), other UTF-8
text as a string (``"text"``), anything else as base64 (``"base64"``). A payload longer
than ``max_payload_bytes`` is cut (``"text"`` or ``"base64"``, with ``payload_truncated:
true`` and the full ``payload_bytes``).

Invariants: ``render_polled`` returns at most ``max_messages`` messages and its JSON text is
at most ``max_response_bytes`` long (messages that do not fit are left out and
``next_offset`` says where to continue; the first is always shown, its payload and then
its headers cut as much as needed: ``headers_truncated``); ``fit`` cuts any other answer
to the byte limit.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec

from lurcher.core.wire.buffer import U64_MAX
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.headers import (
    HeaderKind,
    HeaderValue,
    decode_headers,
    field_text,
    key_text,
    kind_name,
)
from lurcher.core.wire.responses.clients import Transport
from lurcher.core.wire.responses.messages import Message, PolledMessages
from lurcher.mcp_server.config import LimitsConfig

_encoder = msgspec.json.Encoder()
MIN_PAYLOAD_PREVIEW_BYTES = 32
# JSON payloads nested deeper are shown as text: the MCP SDK refuses to serialize an answer
# nested about 250 deep (the message and the answer around it included), msgspec to parse
# about 1000 levels
MAX_JSON_DEPTH = 64

# field name -> code -> name, applied to every dict rendered from a wire value
_NAMED_CODES: dict[str, dict[int, str]] = {
    "compression": {1: "none", 2: "gzip"},
    "status": {1: "active", 2: "inactive"},
    "transport": {t.value: t.name.lower() for t in Transport},
}
_UNLIMITED_FIELDS = frozenset({"message_expiry_us", "max_topic_size_bytes", "expiry_at"})


def dumps(value: Any) -> str:
    """Compact JSON text of a plain value."""
    return _encoder.encode(value).decode()


def size_of(value: Any) -> int:
    return len(_encoder.encode(value))


# -- wire values --------------------------------------------------------------------------------

def plain(value: Any) -> Any:
    """A wire response (msgspec Structs, lists) as JSON-ready builtins: ``header`` sub-objects
    are merged into their parent, codes get names, u64::MAX limits read "unlimited"."""
    return _tidy(msgspec.to_builtins(value, enc_hook=_enc_hook))


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, memoryview):
        return bytes(obj)
    raise NotImplementedError(type(obj).__name__)


def _tidy(value: Any) -> Any:
    if isinstance(value, list):
        return [_tidy(v) for v in value]
    if not isinstance(value, dict):
        return value
    header = value.pop("header", None)
    merged = {**header, **value} if isinstance(header, dict) else value
    return {k: _tidy_field(k, v) for k, v in merged.items()}


def _tidy_field(key: str, value: Any) -> Any:
    if key in _NAMED_CODES and isinstance(value, int):
        return _NAMED_CODES[key].get(value, value)
    if key in _UNLIMITED_FIELDS and value == U64_MAX:
        return "unlimited"
    return _tidy(value)


# -- payloads and headers -----------------------------------------------------------------------

def render_payload(raw: bytes, max_bytes: int) -> dict[str, Any]:
    """``payload_encoding``, ``payload``, ``payload_bytes`` (+ ``payload_truncated``)."""
    out: dict[str, Any] = {"payload_bytes": len(raw)}
    text = _utf8(raw)
    if text is not None and len(raw) <= max_bytes:
        parsed = _json_container(text)
        if parsed is not None:
            return out | {"payload_encoding": "json", "payload": parsed}
        return out | {"payload_encoding": "text", "payload": text}
    if text is not None:
        cut = raw[:max_bytes].decode("utf-8", errors="ignore")
        return out | {"payload_encoding": "text", "payload": cut, "payload_truncated": True}
    budget = max_bytes * 3 // 4
    encoded = base64.b64encode(raw[:budget]).decode()
    out |= {"payload_encoding": "base64", "payload": encoded}
    return out | ({"payload_truncated": True} if len(raw) > budget else {})


def _utf8(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _json_container(text: str) -> Any:
    """``text`` parsed when it is a JSON object or array nested at most ``MAX_JSON_DEPTH``
    deep, else None (it is shown as text)."""
    stripped = text.lstrip()
    if not stripped[:1] in ("{", "["):
        return None
    try:
        parsed = msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return None
    shallow = text.count("[") + text.count("{") <= MAX_JSON_DEPTH  # no need to walk it
    return parsed if shallow or _nested_within(parsed, MAX_JSON_DEPTH) else None


def _nested_within(value: Any, depth: int) -> bool:
    """Whether lists and objects in ``value`` nest at most ``depth`` deep (walked a level at
    a time, without recursion)."""
    level = [value]
    for _ in range(depth):
        level = [child for item in level for child in _children(item)]
        if not level:
            return True
    return not any(isinstance(item, (list, dict)) for item in level)


def _children(value: Any) -> Iterable[Any]:
    if isinstance(value, dict):
        return value.values()
    return value if isinstance(value, list) else ()


def header_text(field: HeaderValue) -> Any:
    """A header value as JSON: numbers and strings as is, raw bytes as base64."""
    value = field.to_python()
    return field_text(field) if isinstance(value, bytes) else value


def render_headers(block: bytes) -> dict[str, Any]:
    """User headers as ``{key: {"kind": ..., "value": ...}}`` (``headers.key_text``: a
    non-string key is written ``"<kind>:<value>"``); a string value that is not UTF-8 is
    base64 with ``"encoding": "base64"``. A block that does not decode yields
    ``{"_undecodable": base64}``."""
    try:
        headers = decode_headers(block)
    except IggyError:
        return {"_undecodable": base64.b64encode(block).decode()}
    out: dict[str, Any] = {}
    for key, value in headers.items():
        shown = {"kind": kind_name(value.kind), "value": header_text(value)}
        if value.kind == HeaderKind.STRING and isinstance(value.to_python(), bytes):
            shown["encoding"] = "base64"
        out[key_text(key)] = shown
    return out


def render_message(m: Message, max_payload_bytes: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "offset": m.offset, "id": str(uuid.UUID(int=m.id)), "timestamp_us": m.timestamp,
        "origin_timestamp_us": m.origin_timestamp,
    }
    out |= render_payload(m.payload, max_payload_bytes)
    if m.user_headers:
        out["headers"] = render_headers(m.user_headers)
    return out


# -- limits -------------------------------------------------------------------------------------

def render_polled(polled: PolledMessages, limits: LimitsConfig, requested: int) -> dict[str, Any]:
    """The answer of a poll, within ``limits`` (see the module invariants)."""
    messages = _take(polled.messages(), limits.max_messages)
    result: dict[str, Any] = {
        "partition_id": polled.partition_id, "current_offset": polled.current_offset,
        "count": 0, "messages": [], "truncated": False, "next_offset": None,
        "limits": {"max_messages": limits.max_messages,
                   "max_response_bytes": limits.max_response_bytes},
    }
    if requested > limits.max_messages:
        result["count_capped_to"] = limits.max_messages
    rendered = _render_within(messages, limits, size_of(result) + 64)
    result["messages"] = rendered
    result["count"] = len(rendered)
    _set_continuation(result, messages, polled.messages_count)
    while size_of(result) > limits.max_response_bytes and rendered:
        rendered.pop()
        result["count"] = len(rendered)
        _set_continuation(result, messages, polled.messages_count)
    return result


def _take(messages: Iterable[Message], n: int) -> list[Message]:
    out: list[Message] = []
    for m in messages:
        if len(out) >= n:
            break
        out.append(m)
    return out


def _render_within(messages: list[Message], limits: LimitsConfig,
                   envelope_bytes: int) -> list[dict[str, Any]]:
    budget = limits.max_response_bytes - envelope_bytes
    rendered: list[dict[str, Any]] = []
    for m in messages:
        item = render_message(m, limits.max_payload_bytes)
        if not rendered:
            item = _shrink_first(m, item, budget, limits.max_payload_bytes)
        cost = size_of(item) + 1
        if cost > budget:
            break
        budget -= cost
        rendered.append(item)
    return rendered


def _shrink_first(m: Message, item: dict[str, Any], budget: int, cap: int) -> dict[str, Any]:
    """The first message is always shown: its payload cut further if it must be, then its
    headers (a message's headers may hold 100,000 bytes: left whole, such a message was
    never shown, and a poll from it never went past it)."""
    while size_of(item) + 1 > budget and cap > MIN_PAYLOAD_PREVIEW_BYTES:
        cap //= 2
        item = render_message(m, cap)
    if size_of(item) + 1 > budget and "headers" in item:
        item = _cut_headers(item, budget - 1)
    return item


def _cut_headers(item: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """``item`` with the first of its headers that fit ``max_bytes``, ``headers_truncated``
    and ``headers_count`` (how many it has)."""
    headers = list(item["headers"].items())

    def wrap(kept: list[tuple[str, Any]]) -> dict[str, Any]:
        return {**item, "headers": dict(kept), "headers_truncated": True,
                "headers_count": len(headers)}
    return _longest_prefix(headers, wrap, max_bytes) or wrap([])


def _set_continuation(result: dict[str, Any], messages: list[Message], total: int) -> None:
    shown = result["count"]
    result["truncated"] = shown < total
    if shown < len(messages):
        result["next_offset"] = messages[shown].offset
    elif messages:
        result["next_offset"] = messages[-1].offset + 1
    else:
        result["next_offset"] = None


def fit(value: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """``value`` unchanged when its JSON fits ``max_bytes``; else its longest list is cut to
    a prefix that fits (``truncated``/``returned``/``total`` say so), else a text preview."""
    if size_of(value) <= max_bytes:
        return value
    lists = [k for k, v in value.items() if isinstance(v, list)]
    if lists:
        key = max(lists, key=lambda k: size_of(value[k]))
        cut = _longest_prefix(value[key], lambda items: {
            **value, key: items, "truncated": True, "returned": len(items),
            "total": len(value[key])}, max_bytes)
        if cut is not None:
            return cut
    return _preview(dumps(value), max_bytes)


def _preview(text: str, max_bytes: int) -> dict[str, Any]:
    """The longest beginning of ``text`` whose answer's JSON fits ``max_bytes`` (counted as
    sent: UTF-8, with its escapes), with the full size."""
    def wrap(cut: str) -> dict[str, Any]:
        return {"truncated": True, "total_bytes": len(text.encode()), "preview": cut}
    return _longest_prefix(text, wrap, max_bytes) or wrap("")


def _longest_prefix(items: Sequence[Any], wrap: Callable[[Any], dict[str, Any]],
                    max_bytes: int) -> dict[str, Any] | None:
    """``wrap`` of the longest prefix of ``items`` (a list or a text) whose JSON fits
    ``max_bytes``; None when not even the empty one fits."""
    lo, hi = 0, len(items)
    if size_of(wrap(items[:0])) > max_bytes:
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if size_of(wrap(items[:mid])) <= max_bytes:
            lo = mid
        else:
            hi = mid - 1
    return wrap(items[:lo])
