"""Human-readable durations as the Iggy SDKs write them (``5s``, ``1m 30s``, ``500ms``,
``2min``, ``1h30m``, ``unlimited`` is NOT a duration). Returns seconds as a float.

Grammar: one or more ``<number><unit>`` terms, optionally separated by spaces; a number
may have a fraction. Units: ns, us/µs, ms, s/sec/secs/second(s), m/min/mins/minute(s),
h/hr/hrs/hour(s), d/day(s), w/week(s). A bare number means seconds.
"""

from __future__ import annotations

import re

_UNITS_S: dict[str, float] = {
    "ns": 1e-9, "nsec": 1e-9, "us": 1e-6, "µs": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "w": 604800.0, "week": 604800.0, "weeks": 604800.0,
}
_TERM = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zµ]*)", re.IGNORECASE)


def parse_duration(text: str) -> float:
    """Seconds for ``text``. Raises ValueError naming the bad part."""
    s = text.strip()
    if not s:
        raise ValueError("empty duration")
    if re.fullmatch(r"\d+(\.\d+)?", s):
        return float(s)
    total, pos = 0.0, 0
    while pos < len(s):
        m = _TERM.match(s, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"invalid duration {text!r} at {s[pos:]!r}")
        unit = m.group(2).lower()
        if unit not in _UNITS_S:
            raise ValueError(f"unknown duration unit {m.group(2)!r} in {text!r}")
        total += float(m.group(1)) * _UNITS_S[unit]
        pos = m.end()
        while pos < len(s) and s[pos] == " ":
            pos += 1
    return total
