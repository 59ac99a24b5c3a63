"""Handler registration: ``@handles(name, permission)`` fills ``HANDLERS``.

``name`` is the wire command name (``core.wire.commands``); ``permission`` names the rule
``auth.permissions`` evaluates ("" = none beyond login). ``load_all`` imports every
handler module so the table is complete.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

MODULES = ("system", "streams", "topics", "partitions", "messages", "offsets", "users",
           "groups", "tokens")


@dataclass(frozen=True)
class HandlerEntry:
    fn: Callable[..., Any]
    permission: str
    login_required: bool


HANDLERS: dict[str, HandlerEntry] = {}


def handles(name: str, permission: str = "", login_required: bool = True):
    """Register the decorated ``fn(shard, session, request)`` for command ``name``."""
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in HANDLERS and HANDLERS[name].fn is not fn:
            raise RuntimeError(f"two handlers for {name}")
        HANDLERS[name] = HandlerEntry(fn, permission, login_required)
        return fn
    return register


def load_all() -> None:
    for module in MODULES:
        importlib.import_module(f"lurcher.core.shard.handlers.{module}")
