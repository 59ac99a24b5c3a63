"""Permission rules of the 0.8 server, one function per rule, evaluated in one place.

Lists show only what the user may read: GetStreams and GetTopics are allowed to a user who
may read at least one item, and ``may_read`` filters the answer.

The dispatcher table names a rule per command; ``authorize`` resolves the request's stream
and topic identifiers to ids, decodes the user's permissions blob (cached per blob) and
evaluates the rule, raising ``IggyError(UNAUTHORIZED)``. A stream or topic that does not
resolve is judged as one the user holds no grant on (the rule sees no id for it): a user
who may not read it gets 41 exactly as for an existing stream or topic it may not read, so
an answer never tells such a user what exists; others pass, and the handler answers
not-found or an empty result.

Two rules depend on whom the request targets (``SELF_RULES``): a user may always read its
own record and change its own password; for any other target (including one that does not
exist, so a refusal says nothing about existence) the named global rule applies.
Personal-access-token commands act only on the caller's own tokens and need no rule.

A logged-in session acts only while its login still holds (``stale_login``;
``require_login`` raises its reason, checked by the dispatcher before every command that
needs a login, on the shard holding the session, which then logs it out, and with the rule
again by ``recheck`` in a handler that awaited): its user exists, is active and is the user
it logged in as (ids are reused after a delete), and the personal access token it logged in
with, if any, still exists. Deleting or deactivating a user and deleting a token end the
sessions of the shard that ran the command at once; the other shards, and the other nodes of
a cluster, end theirs as they apply the change (``users.end_stale_sessions``), and this check
refuses any command that comes first.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

from lurcher.auth.root import USER_ACTIVE
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.values.permissions import Permissions, StreamPermissions

Rule = Callable[[Permissions, int | None, int | None], bool]


@lru_cache(maxsize=1024)
def decode_permissions(blob: bytes | None) -> Permissions:
    return Permissions() if not blob else Permissions.decode(blob)[0]


def _stream(p: Permissions, sid: int | None) -> StreamPermissions | None:
    return None if sid is None else p.streams.get(sid)


def _topic(p: Permissions, sid: int | None, tid: int | None):
    s = _stream(p, sid)
    return None if s is None or tid is None else s.topics.get(tid)


def server_info(p: Permissions, sid, tid) -> bool:
    return p.global_.manage_servers or p.global_.read_servers


def read_users(p: Permissions, sid, tid) -> bool:
    return p.global_.manage_users or p.global_.read_users


def manage_users(p: Permissions, sid, tid) -> bool:
    return p.global_.manage_users


def read_streams(p: Permissions, sid, tid) -> bool:
    return p.global_.manage_streams or p.global_.read_streams


def read_stream(p: Permissions, sid, tid) -> bool:
    s = _stream(p, sid)
    return read_streams(p, sid, tid) or bool(s and (s.manage_stream or s.read_stream))


def create_stream(p: Permissions, sid, tid) -> bool:
    return p.global_.manage_streams


def manage_stream(p: Permissions, sid, tid) -> bool:
    s = _stream(p, sid)
    return p.global_.manage_streams or bool(s and s.manage_stream)


def read_topics(p: Permissions, sid, tid) -> bool:
    g, s = p.global_, _stream(p, sid)
    if g.read_streams or g.manage_streams or g.manage_topics or g.read_topics:
        return True
    return bool(s and (s.manage_stream or s.read_stream or s.manage_topics or s.read_topics))


def read_topic(p: Permissions, sid, tid) -> bool:
    t = _topic(p, sid, tid)
    return read_topics(p, sid, tid) or bool(t and (t.manage_topic or t.read_topic))


def create_topic(p: Permissions, sid, tid) -> bool:
    g, s = p.global_, _stream(p, sid)
    return g.manage_streams or g.manage_topics or bool(s and (s.manage_stream or s.manage_topics))


def manage_topic(p: Permissions, sid, tid) -> bool:
    t = _topic(p, sid, tid)
    return create_topic(p, sid, tid) or bool(t and t.manage_topic)


def poll_messages(p: Permissions, sid, tid) -> bool:
    s, t = _stream(p, sid), _topic(p, sid, tid)
    if p.global_.poll_messages or read_topics(p, sid, tid):
        return True
    if s and s.poll_messages:
        return True
    return bool(t and (t.manage_topic or t.read_topic or t.poll_messages))


def send_messages(p: Permissions, sid, tid) -> bool:
    g, s, t = p.global_, _stream(p, sid), _topic(p, sid, tid)
    if g.send_messages or g.manage_streams or g.manage_topics:
        return True
    if s and (s.manage_stream or s.manage_topics or s.send_messages):
        return True
    return bool(t and (t.manage_topic or t.send_messages))


def list_streams(p: Permissions, sid, tid) -> bool:
    """GetStreams: global stream reading, or reading at least one stream (the list is then
    filtered to those, see ``may_read``)."""
    return read_streams(p, sid, tid) or any(s.manage_stream or s.read_stream
                                            for s in p.streams.values())


def list_topics(p: Permissions, sid, tid) -> bool:
    """GetTopics of stream ``sid``: reading its topics, or at least one of them (filtered)."""
    stream = _stream(p, sid)
    return read_topics(p, sid, tid) or bool(stream and any(
        t.manage_topic or t.read_topic for t in stream.topics.values()))


RULES: dict[str, Rule] = {
    "list_streams": list_streams, "list_topics": list_topics,
    "server_info": server_info, "read_users": read_users, "manage_users": manage_users,
    "read_streams": read_streams, "read_stream": read_stream, "create_stream": create_stream,
    "manage_stream": manage_stream, "read_topics": read_topics, "read_topic": read_topic,
    "create_topic": create_topic, "manage_topic": manage_topic,
    "poll_messages": poll_messages, "send_messages": send_messages,
}


# rule name -> the rule applied when the request's ``user_id`` is not the caller
SELF_RULES: dict[str, Rule] = {"read_user": read_users, "change_password": manage_users}


def _targets_self(state: Any, session: Any, request: Any) -> bool:
    ident = getattr(request, "user_id", None)
    if ident is None:
        return False
    try:
        return state.user(ident).id == session.user_id
    except IggyError:
        return False


def _resolve_ids(state: Any, request: Any) -> tuple[int | None, int | None]:
    """The ids of the request's stream and topic, None for what does not resolve. Every
    rule is monotone in them: one that holds with no ids (a global grant) holds with any, so
    ``authorize`` resolves only when the global grants do not suffice."""
    stream_ident = getattr(request, "stream_id", None)
    topic_ident = getattr(request, "topic_id", None)
    if stream_ident is None:
        return None, None
    try:
        stream = state.stream(stream_ident)
    except IggyError:
        return None, None
    if topic_ident is None:
        return stream.id, None
    try:
        return stream.id, state.topic(stream_ident, topic_ident).id
    except IggyError:
        return stream.id, None


def stale_login(state: Any, session: Any) -> str | None:
    """Why the logged-in session's login no longer holds, or None while it does: its user
    exists, is active and is the one it logged in as, and its personal access token, if it
    used one, still exists."""
    user = state.users.get(session.user_id)
    if user is None or user.status != USER_ACTIVE:
        return "user no longer exists or is inactive"
    if session.user_created_at not in (None, user.created_at):
        return "user no longer exists (its id was given to another user)"
    if session.token_name is not None and session.token_name not in user.tokens:
        return "the personal access token of this login was deleted"
    return None


def require_login(state: Any, session: Any) -> None:
    """Raise IggyError UNAUTHENTICATED, with ``stale_login``'s reason, unless the logged-in
    session's login still holds."""
    stale = stale_login(state, session)
    if stale is not None:
        raise IggyError(ErrorCode.UNAUTHENTICATED, stale)


def recheck(state: Any, session: Any, rule_name: str, request: Any) -> None:
    """The dispatcher's two checks again, for a handler after an await: the session's login
    still holds (``require_login``) and it still passes ``rule_name`` (``authorize``).
    Raises IggyError UNAUTHENTICATED or UNAUTHORIZED."""
    require_login(state, session)
    authorize(state, session, rule_name, request)


def authorize(state: Any, session: Any, rule_name: str, request: Any) -> None:
    """Raise IggyError UNAUTHORIZED unless the session's user passes ``rule_name``;
    UNAUTHENTICATED when that user no longer exists."""
    user = state.users.get(session.user_id)
    if user is None:
        raise IggyError(ErrorCode.UNAUTHENTICATED, "user no longer exists")
    if rule_name in SELF_RULES:
        if _targets_self(state, session, request):
            return
        _check(SELF_RULES[rule_name], rule_name, user, None, None)
        return
    rule = RULES[rule_name]
    if rule(decode_permissions(user.permissions), None, None):
        return  # a global grant: it holds for every stream and topic (see ``_resolve_ids``)
    stream_id, topic_id = _resolve_ids(state, request)
    _check(rule, rule_name, user, stream_id, topic_id)


def may_read(state: Any, session: Any, rule_name: str, stream_id: int,
             topic_id: int | None = None) -> bool:
    """Whether the session's user passes ``rule_name`` for one stream/topic (list filters)."""
    user = state.users.get(session.user_id)
    return user is not None and RULES[rule_name](decode_permissions(user.permissions),
                                                 stream_id, topic_id)


def _check(rule: Rule, rule_name: str, user: Any, stream_id: int | None,
           topic_id: int | None) -> None:
    if not rule(decode_permissions(user.permissions), stream_id, topic_id):
        raise IggyError(ErrorCode.UNAUTHORIZED, f"{rule_name} denied for user {user.id}")
