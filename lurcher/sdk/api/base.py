"""What every command mixin of ``Client`` relies on, and argument conversions they share.

``ApiBase._call(request)`` sends a typed request and returns its decoded response (None for
empty / not found, a list for list commands); ``_raw(code, parts)`` sends prebuilt payload
parts and returns the OK payload. Both raise IggyError carrying the Iggy status code.
"""

from __future__ import annotations

import functools
from typing import Any

from lurcher.core.wire.buffer import Buffer
from lurcher.core.wire.codec import Request
from lurcher.core.wire.identifier import Identifier
from lurcher.sdk.arguments import empty_name_refused

Id = int | str | Identifier


def ident(value: Id) -> Identifier:
    """An Identifier from an int, a name (all-digit names are numeric, as in Iggy) or itself
    (kept: a client names the same few streams and topics in every request). Raises
    InvalidArgument for an empty name (other bad values: when the request is encoded)."""
    empty_name_refused(value)
    try:
        return _kept_ident(value)
    except TypeError:  # unhashable, so neither a name nor an id: treated as before
        return Identifier.parse(value)


_kept_ident = functools.lru_cache(maxsize=4096, typed=True)(Identifier.parse)


class ApiBase:
    async def _call(self, request: Request) -> Any:
        raise NotImplementedError

    async def _raw(self, code: int, parts: list[Buffer]) -> memoryview:
        raise NotImplementedError
