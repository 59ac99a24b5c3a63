"""Handler registration: ``@handles(name)`` fills ``HANDLERS`` (command name -> function).

``name`` is the command's name in the registry ``core.wire.commands``, which also holds its
permission rule and routing kind; a handler module only says which function runs it.
``load_all`` imports every handler module so the table is complete. Invariant: one
function per name (registering a second raises).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

MODULES = ("system", "streams", "topics", "partitions", "messages", "offsets", "users",
           "groups", "tokens")

Handler = Callable[..., Any]
HANDLERS: dict[str, Handler] = {}


def handles(name: str) -> Callable[[Handler], Handler]:
    """Register the decorated ``fn(shard, session, request)`` for command ``name``."""
    def register(fn: Handler) -> Handler:
        if name in HANDLERS and HANDLERS[name] is not fn:
            raise RuntimeError(f"two handlers for {name}")
        HANDLERS[name] = fn
        return fn
    return register


def load_all() -> None:
    for module in MODULES:
        importlib.import_module(f"lurcher.core.shard.handlers.{module}")
