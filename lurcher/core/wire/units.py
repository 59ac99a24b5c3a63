"""Human sizes and durations: the one parser shared by the server configuration, the SDK's
connection strings, the CLI, the MCP server and the HTTP JSON shapes.

Sizes: a byte count, or a number (fractions allowed, exact) with a decimal (kB, MB, ...) or
binary (KiB, MiB, ...) unit, spaces optional: "1 GiB", "1.5MB", "512 KiB"; one that is not a
whole number of bytes ("1.5", "1.0001 kB") is refused. Durations, the
humantime grammar the Iggy SDKs use: one or more ``<number><unit>`` terms ("5s", "1m 30s",
"500ms", "2h30m", "3months", "1y"); a bare number is seconds. Units are humantime's (a
month is 30.44 days, a year 365.25 days); "M" is a month and "m" a minute, as there, and
any other unit is read in any case. "unlimited"/"never"/"none" mean no limit
(``U64_MAX``); "default"/"server_default" mean 0 (the server's default) where a request
field allows it.
"""

from __future__ import annotations

import re
from typing import Any
from decimal import Decimal, InvalidOperation

U64_MAX = 0xFFFF_FFFF_FFFF_FFFF
US_PER_S = 1_000_000

SIZE_UNITS: dict[str, int] = {
    "": 1, "b": 1,
    "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
    "t": 10**12, "tb": 10**12, "pb": 10**15, "eb": 10**18,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "pib": 2**50,
}
DURATION_UNITS_S: dict[str, float] = {
    "ns": 1e-9, "nsec": 1e-9, "us": 1e-6, "µs": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "w": 604800.0, "week": 604800.0, "weeks": 604800.0,
    "nanos": 1e-9, "millis": 1e-3,
    "month": 2_630_016.0, "months": 2_630_016.0,  # 30.44 days, as humantime
    "y": 31_557_600.0, "year": 31_557_600.0, "years": 31_557_600.0,  # 365.25 days
}
# Units told apart by case alone (humantime's "M" is a month, "m" a minute); every other
# unit is read in any case.
CASED_DURATION_UNITS_S: dict[str, float] = {"M": 2_630_016.0}
MAX_DURATION_S = U64_MAX / US_PER_S  # a duration is held as u64 microseconds
UNLIMITED_WORDS = frozenset({"unlimited", "never", "none", "infinite", "never_expire"})
SERVER_DEFAULT_WORDS = frozenset({"default", "server_default"})

_SIZE = re.compile(r"^\s*([0-9][0-9_]*(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")
_TERM = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zµ]*)", re.IGNORECASE | re.ASCII)


def parse_size(value: int | str) -> int:
    """Bytes; "unlimited" -> U64_MAX. Raises ValueError for anything else."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int):
        return value
    if value.strip().lower() in UNLIMITED_WORDS:
        return U64_MAX
    m = _SIZE.match(value)
    unit = m.group(2).lower() if m else None
    if unit not in SIZE_UNITS:
        raise ValueError(f"not a size: {value!r} (examples: 1048576, \"512 KiB\", \"1 GB\")")
    try:
        size = Decimal(m.group(1).replace("_", "")) * SIZE_UNITS[unit]
    except InvalidOperation:
        raise ValueError(f"not a size: {value!r}") from None
    if size != size.to_integral_value():
        raise ValueError(f"not a whole number of bytes: {value!r}")
    return int(size)


def parse_duration(text: str) -> float:
    """Seconds. Raises ValueError naming the bad part."""
    s = text.strip()
    if not s:
        raise ValueError("empty duration")
    if re.fullmatch(r"\d+(\.\d+)?", s, re.ASCII):
        return _bounded_duration(float(s), text)
    total, pos = 0.0, 0
    while pos < len(s):
        m = _TERM.match(s, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"invalid duration {text!r} at {s[pos:]!r}")
        total += float(m.group(1)) * _duration_unit_s(m.group(2), text)
        pos = m.end()
    return _bounded_duration(total, text)


def _duration_unit_s(unit: str, text: str) -> float:
    """Seconds in one ``unit`` of ``text``. Raises ValueError."""
    seconds = CASED_DURATION_UNITS_S.get(unit) or DURATION_UNITS_S.get(unit.lower())
    if seconds is None:
        raise ValueError(f"unknown duration unit {unit!r} in {text!r}")
    return seconds


def _bounded_duration(seconds: float, text: str) -> float:
    """``seconds`` when its microseconds fit a u64. Raises ValueError."""
    if not seconds <= MAX_DURATION_S:  # also inf (and nan)
        raise ValueError(f"duration {shown(text)} is too long (at most {int(MAX_DURATION_S)} s)")
    return seconds


def parse_duration_us(value: int | str) -> int:
    """Microseconds: an int is taken as µs; "unlimited"/"none" -> U64_MAX. Raises ValueError."""
    if isinstance(value, int):
        return value
    if value.strip().lower() in UNLIMITED_WORDS:
        return U64_MAX
    return min(U64_MAX, round(parse_duration(value) * US_PER_S))


def limit_bytes(value: int | str | None) -> int:
    """A topic-size argument: None/"default" -> 0 (server default), else ``parse_size``."""
    if value is None or (isinstance(value, str) and value.strip().lower() in SERVER_DEFAULT_WORDS):
        return 0
    return parse_size(value)


def limit_us(value: int | str | None) -> int:
    """An expiry argument: None/"default" -> 0 (server default), else ``parse_duration_us``."""
    if value is None or (isinstance(value, str) and value.strip().lower() in SERVER_DEFAULT_WORDS):
        return 0
    return parse_duration_us(value)


def shown(value: Any, most: int = 40) -> str:
    """``repr(value)`` cut to ``most`` characters (an int of over 4,300 digits has none:
    Python refuses to make one, ValueError)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= most else text[:most] + "..."


def decimal(text: str, highest: int) -> int | None:
    """``text`` as an int when it is ASCII decimal digits (leading zeros allowed) worth at
    most ``highest``, else None. ``str.isdigit`` also accepts other digits ('١', '²'), which
    ``int`` then reads or refuses, and ``int`` refuses over 4,300 digits: every text a
    client or a file name gives as a number goes through here."""
    if not (text.isascii() and text.isdigit()):
        return None
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(highest)):
        return None
    value = int(digits)
    return value if value <= highest else None
