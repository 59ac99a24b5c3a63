"""The ``Authorization: Bearer`` credentials of a request, for the HTTP API and ``lurcher-mcp``.

One reading for both (RFC 9110 §11.1, RFC 6750 §2.1): the first ``Authorization`` header,
its scheme ``Bearer`` in any case, one space, then the credentials with the whitespace
around them dropped. Anything else (no header, another scheme, no credentials) reads as
``b""``, which no caller accepts. Sans-IO: it takes an ASGI scope's raw header list.
"""

from __future__ import annotations

from collections.abc import Iterable


def bearer_credentials(headers: Iterable[tuple[bytes, bytes]]) -> bytes:
    """The Bearer credentials of ``headers`` (ASGI: lower-case names), else b""."""
    header = next((value for name, value in headers if name == b"authorization"), b"")
    scheme, _, credentials = header.partition(b" ")
    return credentials.strip() if scheme.lower() == b"bearer" else b""
