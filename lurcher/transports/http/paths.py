"""Routing on the raw request path, so a path segment may hold an encoded slash.

Owns the ``path`` that Starlette's router matches: uvicorn fills ``scope["path"]`` with the
whole raw path percent-decoded, so ``/personal-access-tokens/a%2Fb`` became three segments
and a name holding '/' (a token, consumer, stream or topic name; Iggy 0.8 routes on the raw
path and decodes each parameter) matched no route. ``EscapedSlashes`` re-decodes the raw
path keeping '/', '%' and the bytes beyond ASCII escaped inside segments; ``path_parameter``
then decodes a matched parameter once, as UTF-8: one that is not is refused INVALID_UTF8, as
Iggy's router refuses it (decoding with U+FFFD for the bad bytes named another stream, topic
or user: "%FF" was the stream called "\ufffd").

Invariants: after ``routing_path`` the only '%' in a path are the escapes of '/', '%' and
bytes beyond ASCII (a raw '%' that starts no escape becomes ``%25``), so ``path_parameter``
(one ``unquote``) gives back exactly the bytes the client encoded; a path without '%' is left
as uvicorn decoded it (no parameter of it holds a '%' or a byte beyond ASCII: h11 takes
visible ASCII only).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

_ESCAPE = re.compile(rb"%([0-9A-Fa-f]{2})|%")
_KEPT = frozenset({0x25, 0x2F})  # '%' and '/'; and every byte beyond ASCII
_ASCII_END = 0x80


def _decoded(match: re.Match[bytes]) -> bytes:
    if match.group(1) is None:
        return b"%25"
    byte = int(match.group(1), 16)
    return match.group(0) if byte in _KEPT or byte >= _ASCII_END else bytes([byte])


def routing_path(raw: bytes) -> str:
    """The raw path decoded, except '/', '%' and the bytes beyond ASCII inside a segment,
    which stay escaped."""
    return _ESCAPE.sub(_decoded, raw).decode("utf-8", "replace")


def path_parameter(value: str) -> str:
    """A path parameter matched on a ``routing_path``, decoded. Raises IggyError
    INVALID_UTF8 when its bytes are not UTF-8."""
    if "%" not in value:
        return value
    try:
        return unquote(value, errors="strict")
    except UnicodeDecodeError as exc:
        raise IggyError(ErrorCode.INVALID_UTF8,
                        f"path parameter {value!r} is not UTF-8: {exc.reason}") from None


class EscapedSlashes:
    """ASGI middleware: route on ``routing_path`` of the raw path when it holds an escape."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        raw = scope.get("raw_path")
        if scope["type"] == "http" and raw and b"%" in raw:
            scope = {**scope, "path": routing_path(raw.split(b"?", 1)[0])}
        await self.app(scope, receive, send)


__all__ = ["EscapedSlashes", "path_parameter", "routing_path"]
