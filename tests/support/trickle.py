"""A slow client for read-deadline tests: send bytes one at a time, a pause apart, and
return what the server sent before it closed the connection.

Waits use ``read(n)``: a ``read()`` to EOF cut short by a timeout drops what it had
already taken, so an answer arriving as a wait ends would be lost."""

from __future__ import annotations

import asyncio

READ_CHUNK = 65_536
NEVER_S = 20.0  # far beyond any deadline under test: reaching it means no close came


async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, data: bytes,
                  pace_s: float = 0.25) -> bytes:
    """Send ``data`` a byte per ``pace_s``; everything the server sent until it closed
    (b"" if it closed without answering). Raises TimeoutError if it never closes."""
    for byte in data:
        writer.write(bytes([byte]))
        try:
            first = await asyncio.wait_for(reader.read(READ_CHUNK), pace_s)
        except asyncio.TimeoutError:
            continue
        return first + (await asyncio.wait_for(reader.read(), NEVER_S) if first else b"")
    return await asyncio.wait_for(reader.read(), NEVER_S)
