"""Printing results: plain-text tables and key/value blocks for people, JSON for scripts.

``Output.table(columns, rows, records)``: text mode prints aligned columns (two spaces
apart, no borders); JSON mode prints ``records`` (the raw values, not the humanised
cells). ``Output.item`` does the same for one record as ``key  value`` lines. ``note``
prints a confirmation line (suppressed by ``--quiet``; in JSON mode an object). Text
output shows control characters in values as escapes (``printable``). Format
helpers (sizes, timestamps, expiry) are pure functions; a time past year 9999 (out of
``datetime``'s range) is shown as ``AFTER_LAST_YEAR``.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Iterable, Sequence
from typing import IO, Any

import msgspec

from lurcher.sdk.api.streams import NEVER_EXPIRE, UNLIMITED_SIZE

COMPRESSION_NAMES = {1: "none", 2: "gzip"}
USER_STATUS_NAMES = {1: "active", 2: "inactive"}
TRANSPORT_NAMES = {1: "tcp", 2: "quic", 3: "http", 4: "websocket"}
_SIZE_UNITS = ("B", "KB", "MB", "GB", "TB", "PB")
_DURATION_UNITS = (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1))
US_PER_S = 1_000_000
AFTER_LAST_YEAR = "after 9999-12-31"


def to_builtins(value: Any) -> Any:
    """JSON-ready Python values (bytes as text when UTF-8, else hex)."""
    return msgspec.to_builtins(value, enc_hook=_enc, str_keys=True)


def _enc(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    raise NotImplementedError(type(value))


def human_size(n: int) -> str:
    if n == UNLIMITED_SIZE:
        return "unlimited"
    size = float(n)
    for unit in _SIZE_UNITS:
        if size < 1000 or unit == _SIZE_UNITS[-1]:
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.2f} {unit}"
        size /= 1000
    return f"{n} B"


def _utc(us: int) -> dt.datetime | None:
    """The UTC time ``us`` microseconds after the epoch; None past datetime's last year
    (9999: a token or expiry far in the future)."""
    try:
        return dt.datetime.fromtimestamp(us / US_PER_S, dt.timezone.utc)
    except (OverflowError, ValueError, OSError):
        return None


def human_time(us: int) -> str:
    if not us:
        return "-"
    stamp = _utc(us)
    return stamp.strftime("%Y-%m-%d %H:%M:%S") if stamp else AFTER_LAST_YEAR


def iso_time(us: int) -> str:
    stamp = _utc(us)
    if stamp is None:
        return AFTER_LAST_YEAR
    return stamp.isoformat(timespec="microseconds").replace("+00:00", "Z")


def human_duration_us(us: int) -> str:
    seconds = us // US_PER_S
    parts = []
    for unit, size in _DURATION_UNITS:
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return " ".join(parts) or f"{us}us"


def human_expiry(us: int) -> str:
    if us == NEVER_EXPIRE:
        return "unlimited"
    return "server_default" if us == 0 else human_duration_us(us)


# Control characters (C0, DEL, C1) as escapes: a name, payload or header holding a newline
# or a terminal escape sequence must not break a line, a column or the terminal.
_ESCAPES = {code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7F, 0xA0))}
_ESCAPES |= {ord("\t"): "\\t", ord("\n"): "\\n", ord("\r"): "\\r"}


def printable(text: str) -> str:
    """``text`` with its control characters escaped (``\\n``, ``\\x1b``), for text output."""
    return text.translate(_ESCAPES)


def render_table(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    cells = [list(columns)] + [[printable(str(c)) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(lines)


class Output:
    def __init__(self, mode: str = "text", quiet: bool = False, stream: IO[str] | None = None):
        self.mode = mode
        self.quiet = quiet
        self.stream = stream or sys.stdout

    @property
    def json(self) -> bool:
        return self.mode == "json"

    def write(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def dump(self, value: Any) -> None:
        self.write(json.dumps(to_builtins(value), indent=2, ensure_ascii=False))

    def table(self, columns: Sequence[str], rows: Iterable[Sequence[Any]],
              records: Any = None) -> None:
        if self.json:
            self.dump(records if records is not None else
                      [dict(zip(columns, row)) for row in rows])
            return
        self.write(render_table(columns, rows))

    def item(self, pairs: Sequence[tuple[str, Any]], record: Any = None) -> None:
        if self.json:
            self.dump(record if record is not None else dict(pairs))
            return
        width = max((len(k) for k, _ in pairs), default=0)
        self.write("\n".join(f"{k.ljust(width)}  {printable(str(v))}" for k, v in pairs))

    def note(self, text: str, **record: Any) -> None:
        """A confirmation: text line, or ``{"ok": true, **record}`` in JSON mode."""
        if self.quiet:
            return
        if self.json:
            self.write(json.dumps({"ok": True, **to_builtins(record)}, ensure_ascii=False))
        else:
            self.write(printable(text))
