"""Operator log lines (logger ``lurcher.audit``): connections opened and closed, logins and
failed logins, metadata changes with who made them, limits hit.

Invariants: never formats a secret (passwords, password hashes, tokens, token digests): a
log line names users, clients, addresses, transports and resources only. Metadata changes are
logged by the shard that owns the metadata (shard 0), once per change, after it applied;
the actor is the session whose command is running (the context variable ``ACTOR``, set by
``Dispatcher.run_here`` for the command and, for commands that change metadata, for the
awaitable it returns), "the server" for start-up and background jobs.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
from typing import Any

from lurcher.auth.session import TRANSPORT_HTTP, TRANSPORT_QUIC, TRANSPORT_TCP, TRANSPORT_WEBSOCKET
from lurcher.core.meta import events as ev
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

log = logging.getLogger("lurcher.audit")

TRANSPORT_NAMES = {TRANSPORT_TCP: "tcp", TRANSPORT_QUIC: "quic", TRANSPORT_HTTP: "http",
                   TRANSPORT_WEBSOCKET: "websocket"}
ACTOR: contextvars.ContextVar[Any] = contextvars.ContextVar("lurcher_actor", default=None)
CHANGE_PREFIXES = ("create_", "delete_", "update_", "change_", "purge_")
LOGIN_COMMANDS = frozenset({"login_user", "login_with_personal_access_token"})
LIMIT_ERRORS = frozenset({
    ErrorCode.PERSONAL_ACCESS_TOKENS_LIMIT_REACHED, ErrorCode.USERS_LIMIT_REACHED,
    ErrorCode.TOO_MANY_PARTITIONS, ErrorCode.TOPIC_FULL, ErrorCode.TOO_BIG_USER_HEADERS,
    ErrorCode.TOO_BIG_MESSAGE_PAYLOAD, ErrorCode.TOO_MANY_MESSAGES,
})


def client(session: Any) -> str:
    """``client 3 (127.0.0.1:40000 over tcp)``."""
    return (f"client {session.client_id} ({session.address} over "
            f"{TRANSPORT_NAMES.get(session.transport, session.transport)})")


def user_name(shard: Any, user_id: int | None) -> str:
    if user_id is None:
        return "nobody"
    user = shard.meta.state.users.get(user_id)
    return repr(user.username) if user is not None else f"user {user_id}"


def connection_opened(session: Any) -> None:
    """A client connected (HTTP sessions live for one request: not logged)."""
    if session.transport != TRANSPORT_HTTP:
        log.info("%s connected", client(session))


def connection_closed(shard: Any, session: Any) -> None:
    if session.transport != TRANSPORT_HTTP:
        log.info("%s disconnected (user %s)", client(session),
                 user_name(shard, session.user_id))


def command_result(shard: Any, session: Any, name: str, request: Any, result: Any) -> Any:
    """Log the outcome of a login; keep the actor known while a metadata change completes.
    Passes ``result`` (a value or an awaitable) through."""
    if name in LOGIN_COMMANDS:
        if inspect.isawaitable(result):
            return _awaited_login(shard, session, name, request, result)
        _logged_in(shard, session)
    elif name.startswith(CHANGE_PREFIXES) and inspect.isawaitable(result):
        return _as_actor(session, result)
    return result


async def _as_actor(session: Any, result: Any) -> Any:
    ACTOR.set(session)  # this coroutine's task context only
    return await result


async def _awaited_login(shard: Any, session: Any, name: str, request: Any, result: Any) -> Any:
    try:
        value = await result
    except IggyError as exc:
        login_failed(session, name, request, exc)
        raise
    _logged_in(shard, session)
    return value


def _logged_in(shard: Any, session: Any) -> None:
    token = f" with personal access token {session.token_name!r}" if session.token_name else ""
    log.info("%s logged in as %s%s", client(session), user_name(shard, session.user_id), token)


def login_failed(session: Any, name: str, request: Any, exc: IggyError) -> None:
    what = (f"as {request.username!r}" if name == "login_user"
            else "with a personal access token")
    log.warning("failed login %s from %s: %s", what, client(session), exc)


def command_failed(session: Any, name: str, request: Any, exc: IggyError) -> None:
    """Log refusals worth an operator's attention: failed logins and limits hit."""
    if name in LOGIN_COMMANDS:
        login_failed(session, name, request, exc)
    elif exc.code in LIMIT_ERRORS:
        log.warning("limit hit: %s refused for %s: %s", name, client(session), exc)


class MetadataAudit:
    """A metadata observer logging each change once it is applied."""

    def __init__(self, shard: Any) -> None:
        self.shard = shard
        self.pending: str | None = None

    def before(self, event: ev.Event, state: Any) -> None:
        self.pending = describe(event, state)

    def after(self, event: ev.Event, state: Any) -> None:
        actor = ACTOR.get()
        by = (f"{user_name(self.shard, actor.user_id)}, {client(actor)}" if actor is not None
              else "the server")
        log.info("%s by %s", self.pending, by)
        self.pending = None


def _stream(state: Any, stream_id: int) -> str:
    stream = state.streams.get(stream_id)
    return f"{stream.name!r} (id {stream_id})" if stream is not None else f"id {stream_id}"


def _topic(state: Any, stream_id: int, topic_id: int) -> str:
    stream = state.streams.get(stream_id)
    topic = stream.topics.get(topic_id) if stream is not None else None
    name = f"{topic.name!r} (id {topic_id})" if topic is not None else f"id {topic_id}"
    return f"{name} of stream {_stream(state, stream_id)}"


def _user(state: Any, user_id: int) -> str:
    user = state.users.get(user_id)
    return f"{user.username!r} (id {user_id})" if user is not None else f"id {user_id}"


def describe(event: ev.Event, state: Any) -> str:
    """One phrase for a metadata event (no secrets), read before it is applied."""
    e: Any = event
    match event:
        case ev.StreamCreated():
            return f"stream {e.name!r} (id {e.id}) created"
        case ev.StreamUpdated():
            return f"stream {_stream(state, e.id)} renamed to {e.name!r}"
        case ev.StreamDeleted():
            return f"stream {_stream(state, e.id)} deleted"
        case ev.TopicCreated():
            return (f"topic {e.name!r} (id {e.id}) with {e.partitions_count} partition(s) "
                    f"created in stream {_stream(state, e.stream_id)}")
        case ev.TopicUpdated():
            return f"topic {_topic(state, e.stream_id, e.id)} updated"
        case ev.TopicDeleted():
            return f"topic {_topic(state, e.stream_id, e.id)} deleted"
        case ev.PartitionsCreated():
            topic = _topic(state, e.stream_id, e.topic_id)
            return f"{e.count} partition(s) created in topic {topic}"
        case ev.PartitionsDeleted():
            topic = _topic(state, e.stream_id, e.topic_id)
            return f"{e.count} partition(s) deleted from topic {topic}"
        case ev.ConsumerGroupCreated():
            return (f"consumer group {e.name!r} (id {e.id}) created in topic "
                    f"{_topic(state, e.stream_id, e.topic_id)}")
        case ev.ConsumerGroupDeleted():
            return (f"consumer group {e.id} deleted from topic "
                    f"{_topic(state, e.stream_id, e.topic_id)}")
        case ev.UserCreated():
            return f"user {e.username!r} (id {e.id}) created"
        case ev.UserUpdated():
            return f"user {_user(state, e.id)} updated (now {e.username!r})"
        case ev.UserPasswordChanged():
            return f"password of user {_user(state, e.id)} changed"
        case ev.UserPermissionsUpdated():
            return f"permissions of user {_user(state, e.id)} updated"
        case ev.UserDeleted():
            return f"user {_user(state, e.id)} deleted"
        case ev.TokenCreated():
            return f"personal access token {e.name!r} of user {_user(state, e.user_id)} created"
        case ev.TokenDeleted():
            return f"personal access token {e.name!r} of user {_user(state, e.user_id)} deleted"
    return f"metadata change {type(event).__name__}"
