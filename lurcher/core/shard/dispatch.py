"""The dispatcher: one table from command code to spec, handler, permission.

Every transport hands ``(session, code, payload)`` here. The table joins the command
registry (``core.wire.commands.COMMANDS``: name, types, permission, routing) with the
handlers registered by the modules of ``core.shard.handlers``; ``build_table`` refuses to
build an incomplete table, so a missing handler stops the server at start. ``dispatch``
decodes, checks the session and the permission, and calls the handler; it returns the
handler's result or an awaitable of it, and raises ``IggyError`` (including ``WireError``)
for failures, which the transport turns into a status.
A handler's write that fails for lack of space becomes CANNOT_WRITE_TO_FILE (10006), the code
0.8 answers for a failed file write, as the metadata log and message appends answer it.
Observers (metrics, tracing) registered with ``add_observer`` hear of every request once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from lurcher.auth.permissions import RULES, SELF_RULES, require_login
from lurcher.core.idle_poll import LoopPoller, PollWindow
from lurcher.core.log.io import is_no_space
from lurcher.core.shard import audit
from lurcher.core.shard.handlers import registry
from lurcher.core.shard.observers import CommandObserver, observed
from lurcher.core.wire.commands import COMMANDS, CommandSpec
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError


@dataclass(frozen=True)
class Route:
    """A command's spec joined with its handler; ``permission`` is the rule to check
    ("" = none beyond login), ``routing`` the spec's routing kind."""

    spec: CommandSpec
    handler: Callable[..., Any]
    permission: str
    login_required: bool
    routing: str


class IncompleteCommandTable(RuntimeError):
    """A command lacks a handler or a known permission rule: the server must not start."""


def _check_permission(spec: CommandSpec) -> None:
    rule = spec.permission_rule
    if rule and rule not in RULES and rule not in SELF_RULES:
        raise IncompleteCommandTable(f"command {spec.name}: unknown permission rule {rule!r}")


def build_table(specs: Iterable[CommandSpec] | None = None,
                handlers: Mapping[str, Callable[..., Any]] | None = None) -> dict[int, Route]:
    """Join the command registry with the registered handlers (defaults: all of both).

    Raises IncompleteCommandTable naming the first command with no handler or an unknown
    permission rule, or a handler that names no command.
    """
    if handlers is None:
        registry.load_all()
        handlers = registry.HANDLERS
    specs = list(COMMANDS.values() if specs is None else specs)
    unknown = sorted(set(handlers) - {spec.name for spec in specs})
    if unknown:
        raise IncompleteCommandTable(f"handler for unknown command {unknown[0]}")
    table = {}
    for spec in specs:
        handler = handlers.get(spec.name)
        if handler is None:
            raise IncompleteCommandTable(f"command {spec.name} has no handler")
        _check_permission(spec)
        table[spec.code] = Route(spec, handler, spec.permission_rule, spec.login_required,
                                 spec.routing)
    return table


class Dispatcher:
    """Executes decoded commands against a shard."""

    def __init__(self, shard: Any) -> None:
        self.shard = shard
        self.table = build_table()
        self.cluster: Any = None  # set when the server runs several shards
        self.observers: list[CommandObserver] = []
        # idle polling between requests (``poll_between_requests``); None: off
        self.idle_poller: LoopPoller | None = None
        self.idle_window = PollWindow(0)

    def poll_between_requests(self, poller: LoopPoller, max_s: float) -> None:
        """After each request, keep ``poller``'s loop polling for the next one, for at most
        ``max_s`` (``core.idle_poll``); 0 turns it off."""
        self.idle_poller = poller if max_s else None
        self.idle_window = PollWindow(max_s)

    def add_observer(self, observer: CommandObserver) -> None:
        """Report every later request to ``observer`` (see ``core.shard.observers``)."""
        if observer not in self.observers:
            self.observers.append(observer)

    def route(self, session: Any, code: int) -> Route:
        """The route for ``code`` after the session check: a command that needs a login
        needs one that still holds (``auth.permissions.stale_login``; a stale one is logged
        out). Raises IggyError."""
        route = self.table.get(code)
        if route is None:
            raise IggyError(ErrorCode.INVALID_COMMAND, f"unknown command code {code}")
        if route.login_required:
            if not session.authenticated:
                raise IggyError(ErrorCode.UNAUTHENTICATED, route.spec.name)
            try:
                require_login(self.shard.meta.state, session)
            except IggyError:
                session.log_out(self.shard.clock())
                raise
        return route

    def dispatch(self, session: Any, code: int, payload: memoryview,
                 connection: Any = None) -> Any:
        """Decode and run one binary command, on the shard that must run it. Returns a
        reply or an awaitable of one; raises IggyError (WireError for undecodable payloads).
        ``connection`` (a stream connection) may be migrated to another shard."""
        if self.idle_poller is not None:
            self.idle_poller.next_event(self.idle_window)
        if self.observers:
            return observed(self.observers, code, self._dispatch, session, code, payload,
                            connection)
        return self._dispatch(session, code, payload, connection)

    def _dispatch(self, session: Any, code: int, payload: memoryview, connection: Any) -> Any:
        route = self.route(session, code)
        request = route.spec.request.decode_exact(payload)
        if self.cluster is None:
            return self.run_here(route, session, request)
        return self.cluster.run(route, session, request, payload, connection)

    def execute(self, session: Any, request: Any) -> Any:
        """Run an already-typed request (front ends that do not speak binary, e.g. HTTP)."""
        if self.observers:
            return observed(self.observers, type(request).CODE, self._execute, session,
                            request)
        return self._execute(session, request)

    def _execute(self, session: Any, request: Any) -> Any:
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
