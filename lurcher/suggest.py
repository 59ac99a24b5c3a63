""""Did you mean" suggestions for a misspelt name (a configuration key or variable), shared
by the server's configuration and ``lurcher-mcp``'s. No other dependency."""

from __future__ import annotations

import difflib


def nearest(name: str, candidates: list[str]) -> str:
    """"; did you mean X?" for the closest candidate, or "" when none is close."""
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""
