"""auth.permissions: every rule, table-driven, and ``authorize`` against a metadata state.

Grants are written as a global flag name, ``("stream", sid, flag)`` or
``("topic", sid, tid, flag)``; each row says which (stream, topic) pairs the rule allows.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from lurcher.auth.permissions import RULES, SELF_RULES, authorize
from lurcher.core.meta import events as ev
from lurcher.core.meta.state import MetaState
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.values.permissions import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)

S1, S2, T1, T2 = 1, 2, 1, 2
PAIRS = [(S1, T1), (S1, T2), (S2, T1), (S2, T2)]


def grant(*items) -> Permissions:
    glob: dict[str, bool] = {}
    streams: dict[int, dict] = {}
    topics: dict[int, dict[int, dict]] = {}
    for item in items:
        if isinstance(item, str):
            glob[item] = True
        elif item[0] == "stream":
            streams.setdefault(item[1], {})[item[2]] = True
        else:
            topics.setdefault(item[1], {}).setdefault(item[2], {})[item[3]] = True
    stream_ids = set(streams) | set(topics)
    return Permissions(GlobalPermissions(**glob), {
        sid: StreamPermissions(**streams.get(sid, {}), topics={
            tid: TopicPermissions(**flags) for tid, flags in topics.get(sid, {}).items()})
        for sid in stream_ids})


ALL = set(PAIRS)
NONE: set = set()
S1_ALL = {(S1, T1), (S1, T2)}
S1T1 = {(S1, T1)}

# (rule, grant, pairs allowed)
CASES = [
    ("server_info", grant(), NONE),
    ("server_info", grant("read_servers"), ALL),
    ("server_info", grant("manage_servers"), ALL),
    ("read_users", grant("read_users"), ALL),
    ("read_users", grant("manage_users"), ALL),
    ("read_users", grant("read_streams"), NONE),
    ("manage_users", grant("read_users"), NONE),
    ("manage_users", grant("manage_users"), ALL),
    ("read_streams", grant("read_streams"), ALL),
    ("read_streams", grant(("stream", S1, "read_stream")), NONE),
    ("read_stream", grant(("stream", S1, "read_stream")), S1_ALL),
    ("read_stream", grant(("stream", S1, "manage_stream")), S1_ALL),
    ("read_stream", grant(("topic", S1, T1, "read_topic")), NONE),
    ("create_stream", grant("manage_streams"), ALL),
    ("create_stream", grant("read_streams", "manage_topics"), NONE),
    ("manage_stream", grant(("stream", S1, "manage_stream")), S1_ALL),
    ("manage_stream", grant(("stream", S1, "read_stream")), NONE),
    ("read_topics", grant("read_topics"), ALL),
    ("read_topics", grant(("stream", S2, "read_topics")), {(S2, T1), (S2, T2)}),
    ("read_topic", grant(("topic", S1, T1, "read_topic")), S1T1),
    ("read_topic", grant(("topic", S1, T1, "manage_topic")), S1T1),
    ("read_topic", grant(("topic", S1, T1, "poll_messages")), NONE),
    ("create_topic", grant("manage_topics"), ALL),
    ("create_topic", grant(("stream", S1, "manage_topics")), S1_ALL),
    ("create_topic", grant(("topic", S1, T1, "manage_topic")), NONE),
    ("manage_topic", grant(("topic", S1, T1, "manage_topic")), S1T1),
    ("manage_topic", grant(("stream", S1, "manage_stream")), S1_ALL),
    ("manage_topic", grant(("topic", S1, T1, "read_topic")), NONE),
    ("poll_messages", grant("poll_messages"), ALL),
    ("poll_messages", grant(("stream", S1, "poll_messages")), S1_ALL),
    ("poll_messages", grant(("topic", S2, T2, "poll_messages")), {(S2, T2)}),
    ("poll_messages", grant(("topic", S2, T2, "send_messages")), NONE),
    ("poll_messages", grant("send_messages"), NONE),
    ("send_messages", grant("send_messages"), ALL),
    ("send_messages", grant("manage_topics"), ALL),
    ("send_messages", grant(("stream", S1, "send_messages")), S1_ALL),
    ("send_messages", grant(("topic", S1, T2, "send_messages")), {(S1, T2)}),
    ("send_messages", grant(("topic", S1, T2, "poll_messages")), NONE),
    ("send_messages", grant("read_topics", "poll_messages"), NONE),
    # list rules: allowed when at least one item is readable (the handler filters the list)
    ("list_streams", grant("read_streams"), ALL),
    ("list_streams", grant(("stream", S2, "read_stream")), ALL),
    ("list_streams", grant("read_topics"), NONE),
    ("list_topics", grant(("topic", S1, T1, "read_topic")), S1_ALL),
    ("list_topics", grant(("stream", S2, "read_topics")), {(S2, T1), (S2, T2)}),
    ("list_topics", grant(("topic", S1, T1, "poll_messages")), NONE),
]


@pytest.mark.parametrize("rule, perms, allowed", CASES)
def test_rule(rule: str, perms: Permissions, allowed: set) -> None:
    got = {(s, t) for s, t in PAIRS if RULES[rule](perms, s, t)}
    assert got == allowed


def test_every_rule_is_covered() -> None:
    assert {c[0] for c in CASES} == set(RULES)


def test_root_passes_every_rule() -> None:
    for rule in RULES.values():
        assert all(rule(Permissions.root(), s, t) for s, t in PAIRS)


# -- authorize against a state -------------------------------------------------------------
@dataclass
class FakeSession:
    user_id: int | None


@dataclass(frozen=True)
class Req:
    stream_id: Identifier | None = None
    topic_id: Identifier | None = None
    user_id: Identifier | None = None


def make_state(*user_perms: Permissions | None) -> MetaState:
    state = MetaState()
    for uid, perms in enumerate(user_perms):
        state.apply(ev.UserCreated(uid, f"user{uid}", "h", 1,
                                   None if perms is None else perms.encode(), 0))
    for sid in (S1, S2):
        state.apply(ev.StreamCreated(sid, f"s{sid}", 0))
        for tid in (T1, T2):
            state.apply(ev.TopicCreated(sid, tid, f"t{tid}", 0, 1, 1, 0, 0, 0))
    return state


def test_authorize_resolves_names_and_ids() -> None:
    state = make_state(grant(("topic", S1, T2, "send_messages")))
    me = FakeSession(0)
    authorize(state, me, "send_messages", Req(Identifier(S1), Identifier("t2")))
    authorize(state, me, "send_messages", Req(Identifier("s1"), Identifier(T2)))
    with pytest.raises(IggyError) as err:
        authorize(state, me, "send_messages", Req(Identifier("s1"), Identifier("t1")))
    assert err.value.code == ErrorCode.UNAUTHORIZED


def test_authorize_grants_on_one_stream_or_topic_hold_there_only() -> None:
    """Grants below the global level are judged against the request's own stream and
    topic, never against any other (the global-grant shortcut must not leak them)."""
    state = make_state(grant(("stream", S1, "send_messages")),
                       grant(("topic", S1, T1, "poll_messages")))
    stream_user, topic_user = FakeSession(0), FakeSession(1)
    authorize(state, stream_user, "send_messages", Req(Identifier(S1), Identifier(T2)))
    authorize(state, topic_user, "poll_messages", Req(Identifier("s1"), Identifier("t1")))
    for session, rule, req in (
            (stream_user, "send_messages", Req(Identifier(S2), Identifier(T1))),
            (topic_user, "poll_messages", Req(Identifier(S1), Identifier(T2))),
            (topic_user, "poll_messages", Req(Identifier(S2), Identifier(T1)))):
        with pytest.raises(IggyError) as err:
            authorize(state, session, rule, req)
        assert err.value.code == ErrorCode.UNAUTHORIZED


def test_authorize_global_grant_holds_for_unknown_streams() -> None:
    """A global grant passes whatever the request names (the handler then answers
    not-found); without it, an unknown stream is one the user holds no grant on."""
    state = make_state(grant("send_messages"), grant(("stream", S1, "send_messages")))
    unknown = Req(Identifier("nope"), Identifier(T1))
    authorize(state, FakeSession(0), "send_messages", unknown)
    with pytest.raises(IggyError) as err:
        authorize(state, FakeSession(1), "send_messages", unknown)
    assert err.value.code == ErrorCode.UNAUTHORIZED


def test_authorize_unknown_user_is_unauthenticated() -> None:
    with pytest.raises(IggyError) as err:
        authorize(make_state(None), FakeSession(7), "read_users", Req())
    assert err.value.code == ErrorCode.UNAUTHENTICATED


@pytest.mark.parametrize("rule", sorted(SELF_RULES))
def test_self_rules(rule: str) -> None:
    needed = "read_users" if rule == "read_user" else "manage_users"
    state = make_state(None, grant(needed), grant("read_servers"))
    plain, privileged, other = FakeSession(0), FakeSession(1), FakeSession(2)
    # a user may always act on itself, by id or by name
    authorize(state, plain, rule, Req(user_id=Identifier(0)))
    authorize(state, plain, rule, Req(user_id=Identifier("user0")))
    # others only with the permission; a missing target is refused the same way
    for target in (Identifier(1), Identifier("user2"), Identifier(99), Identifier("nobody")):
        with pytest.raises(IggyError) as err:
            authorize(state, plain, rule, Req(user_id=target))
        assert err.value.code == ErrorCode.UNAUTHORIZED
        with pytest.raises(IggyError):
            authorize(state, other, rule, Req(user_id=target if target != Identifier("user2")
                                               else Identifier(0)))
        authorize(state, privileged, rule, Req(user_id=target))
