"""The dispatcher: one table from command code to name, request type, handler, permission.

Every transport hands ``(session, code, payload)`` here. The table joins the wire command
table (``core.wire.commands.COMMANDS``) with the handlers registered by the modules of
``core.shard.handlers``. ``dispatch`` decodes, checks the session and the permission, and
calls the handler; it returns the handler's result or an awaitable of it, and raises
``IggyError`` (including ``WireError``) for failures, which the transport turns into a status.
A handler's write that fails for lack of space becomes CANNOT_WRITE_TO_FILE (10006), the code
0.8 answers for a failed file write, as the metadata log and message appends answer it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from lurcher.core.log.io import is_no_space
from lurcher.core.shard import audit
from lurcher.core.shard.handlers import registry
from lurcher.core.wire.commands import COMMANDS, CommandSpec
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError


@dataclass(frozen=True)
class Route:
    spec: CommandSpec
    handler: Callable[..., Any]
    permission: str
    login_required: bool


def build_table() -> dict[int, Route]:
    """Join the wire table with the registered handlers. Raises if a handler names no command."""
    registry.load_all()
    by_name = {spec.name: spec for spec in COMMANDS.values()}
    unknown = set(registry.HANDLERS) - set(by_name)
    if unknown:
        raise RuntimeError(f"handlers for unknown commands: {sorted(unknown)}")
    table = {}
    for name, entry in registry.HANDLERS.items():
        spec = by_name[name]
        table[spec.code] = Route(spec, entry.fn, entry.permission, entry.login_required)
    return table


class Dispatcher:
    """Executes decoded commands against a shard."""

    def __init__(self, shard: Any) -> None:
        self.shard = shard
        self.table = build_table()
        self.cluster: Any = None  # set when the server runs several shards

    def route(self, session: Any, code: int) -> Route:
        """The route for ``code`` after the session check. Raises IggyError."""
        route = self.table.get(code)
        if route is None:
            raise IggyError(ErrorCode.INVALID_COMMAND, f"unknown command code {code}")
        if route.login_required and not session.authenticated:
            raise IggyError(ErrorCode.UNAUTHENTICATED, route.spec.name)
        return route

    def dispatch(self, session: Any, code: int, payload: memoryview,
                 connection: Any = None) -> Any:
        """Decode and run one binary command, on the shard that must run it. Returns a
        reply or an awaitable of one; raises IggyError (WireError for undecodable payloads).
        ``connection`` (a stream connection) may be migrated to another shard."""
        route = self.route(session, code)
        request = route.spec.request.decode_exact(payload)
        if self.cluster is None:
            return self.run_here(route, session, request)
        return self.cluster.run(route, session, request, payload, connection)

    def execute(self, session: Any, request: Any) -> Any:
        """Run an already-typed request (front ends that do not speak binary, e.g. HTTP)."""
        route = self.route(session, type(request).CODE)
        if self.cluster is None:
            return self.run_here(route, session, request)
        return self.cluster.run(route, session, request, None, None)

    def run_here(self, route: Route, session: Any, request: Any) -> Any:
        """Check the permission, validate, and run the handler on this shard (the session is
        ``audit.ACTOR`` meanwhile, for the audit log). A full disk is CannotWriteToFile."""
        name = route.spec.name
        actor = audit.ACTOR.set(session)
        try:
            if route.permission:
                self.shard.authorize(session, route.permission, request)
            request.validate()
            result = self._call(route, session, request)
        except IggyError as exc:
            audit.command_failed(session, name, request, exc)
            raise
        finally:
            audit.ACTOR.reset(actor)
        return audit.command_result(self.shard, session, name, request, result)

    def _call(self, route: Route, session: Any, request: Any) -> Any:
        try:
            return route.handler(self.shard, session, request)
        except OSError as exc:
            if is_no_space(exc):  # e.g. a consumer offset file on a full disk
                raise IggyError(ErrorCode.CANNOT_WRITE_TO_FILE, str(exc)) from exc
            raise
