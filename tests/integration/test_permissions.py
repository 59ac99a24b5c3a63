"""Permissions enforced on every command, table-driven, against a real server over raw TCP.

Each row: a command, a grant and its scope. For every row a fresh pair of streams (A, B),
each with topics t1 and t2, is set up by root, and a user holding exactly that grant (on A,
or on A/t1) is created. The user must succeed on A/t1; must get 41 Unauthorized on B/t1
(stream and topic grants) and on A/t2 (topic grants); and a user with a near-miss grant
must get 41 on A/t1. Rows of destructive commands run their successful call last.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.consumer_groups.create_consumer_group import CreateConsumerGroup
from lurcher.core.wire.requests.consumer_groups.delete_consumer_group import DeleteConsumerGroup
from lurcher.core.wire.requests.consumer_groups.get_consumer_group import GetConsumerGroup
from lurcher.core.wire.requests.consumer_groups.get_consumer_groups import GetConsumerGroups
from lurcher.core.wire.requests.consumer_groups.join_consumer_group import JoinConsumerGroup
from lurcher.core.wire.requests.consumer_groups.leave_consumer_group import LeaveConsumerGroup
from lurcher.core.wire.requests.consumer_offsets.delete_consumer_offset import DeleteConsumerOffset
from lurcher.core.wire.requests.consumer_offsets.get_consumer_offset import GetConsumerOffset
from lurcher.core.wire.requests.consumer_offsets.store_consumer_offset import StoreConsumerOffset
from lurcher.core.wire.requests.messages.flush_unsaved_buffer import FlushUnsavedBuffer
from lurcher.core.wire.requests.partitions.create_partitions import CreatePartitions
from lurcher.core.wire.requests.partitions.delete_partitions import DeletePartitions
from lurcher.core.wire.requests.segments.delete_segments import DeleteSegments
from lurcher.core.wire.requests.topics.update_topic import UpdateTopic
from lurcher.core.wire.values.consumer import Consumer
from tests.support import raw
from tests.support.server import LurcherServer
from tests.support.users import (
    Perms,
    UserClient,
    change_password_payload,
    create_user_payload,
    update_permissions_payload,
    update_user_payload,
)

UNAUTHORIZED = 41
CHEAP_ARGON2 = {"LURCHER_AUTH_ARGON2_TIME_COST": "1", "LURCHER_AUTH_ARGON2_MEMORY_COST_KIB": "1024"}
VICTIM_PASSWORD = "victim-password"
_counter = itertools.count()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LurcherServer]:
    with LurcherServer() as srv:
        srv.start(tmp_path_factory.mktemp("perm-server"), CHEAP_ARGON2)
        yield srv


@pytest.fixture(scope="module")
def root(server: LurcherServer) -> Iterator[UserClient]:
    with UserClient(server.tcp_address) as client:
        client.login_as("iggy", "iggy")
        yield client


# -- the world each row acts on ------------------------------------------------------------
@dataclass
class World:
    n: int
    streams: dict[str, int] = field(default_factory=dict)   # "A"/"B" -> stream id
    topics: dict[tuple[str, str], int] = field(default_factory=dict)
    victim_id: int = 0
    client_id: int = 0

    def s(self, key: str) -> str:
        return f"w{self.n}{key}"


@dataclass(frozen=True)
class Target:
    world: World
    stream: str   # "A" or "B"
    topic: str    # "t1" or "t2"

    @property
    def sid(self) -> Identifier:
        return Identifier(self.world.s(self.stream))

    @property
    def tid(self) -> Identifier:
        return Identifier(self.topic)


def build_world(root: UserClient) -> World:
    w = World(next(_counter))
    for key in ("A", "B"):
        w.streams[key] = root.create_stream(w.s(key))
        for topic in ("t1", "t2"):
            w.topics[(key, topic)] = root.create_topic(w.s(key), topic, 2)
            root.call(602, CreateConsumerGroup(Identifier(w.s(key)), Identifier(topic), "g").encode())
            root.send(w.s(key), topic, raw.partition_id(0), [raw.message(b"hello")])
            root.call(121, StoreConsumerOffset(Consumer.of(0), Identifier(w.s(key)),
                                               Identifier(topic), 0, 0).encode())
    w.victim_id = root.create_user(f"victim{w.n}", VICTIM_PASSWORD).id
    return w


# -- payloads ------------------------------------------------------------------------------
Build = Callable[[Target], tuple[int, bytes]]


def enc(code: int, make: Callable[[Target], object]) -> Build:
    return lambda t: (code, make(t).encode())  # type: ignore[attr-defined]


def plain(code: int, payload: Callable[[Target], bytes] = lambda t: b"") -> Build:
    return lambda t: (code, payload(t))


def offset_req(cls):
    return lambda t: cls(Consumer.of(0), t.sid, t.tid, 0)


COMMAND: dict[str, Build] = {
    "get_stats": plain(10),
    "get_snapshot_file": plain(11, lambda t: bytes([1, 1, 100])),
    "get_client": plain(21, lambda t: struct.pack("<I", t.world.client_id)),
    "get_clients": plain(22),
    "get_user": plain(31, lambda t: raw.ident(t.world.victim_id)),
    "get_users": plain(32),
    "create_user": plain(33, lambda t: create_user_payload(f"new{t.world.n}", "password")),
    "delete_user": plain(34, lambda t: raw.ident(t.world.victim_id)),
    "update_user": plain(35, lambda t: update_user_payload(t.world.victim_id, f"ren{t.world.n}")),
    "update_permissions": plain(36, lambda t: update_permissions_payload(t.world.victim_id,
                                                                        Perms({"read_streams"}).blob())),
    "change_password": plain(37, lambda t: change_password_payload(
        t.world.victim_id, VICTIM_PASSWORD, "changed-password")),
    "poll_messages": plain(100, lambda t: raw.poll_payload(t.world.s(t.stream), t.topic, 0,
                                                           raw.STRATEGY_OFFSET, 0, 10)),
    "send_messages": plain(101, lambda t: raw.send_messages_payload(
        t.world.s(t.stream), t.topic, raw.partition_id(0), [raw.message(b"more")])),
    "flush_unsaved_buffer": enc(102, lambda t: FlushUnsavedBuffer(t.sid, t.tid, 0, False)),
    "get_consumer_offset": enc(120, offset_req(GetConsumerOffset)),
    "store_consumer_offset": enc(121, lambda t: StoreConsumerOffset(Consumer.of(0), t.sid, t.tid, 0, 0)),
    "delete_consumer_offset": enc(122, offset_req(DeleteConsumerOffset)),
    "get_stream": plain(200, lambda t: raw.ident(t.world.s(t.stream))),
    "get_streams": plain(201),
    "create_stream": plain(202, lambda t: raw.name(f"w{t.world.n}new")),
    "delete_stream": plain(203, lambda t: raw.ident(t.world.s(t.stream))),
    "update_stream": plain(204, lambda t: raw.ident(t.world.s(t.stream))
                           + raw.name(t.world.s(t.stream) + "x")),
    "purge_stream": plain(205, lambda t: raw.ident(t.world.s(t.stream))),
    "get_topic": plain(300, lambda t: raw.ident(t.world.s(t.stream)) + raw.ident(t.topic)),
    "get_topics": plain(301, lambda t: raw.ident(t.world.s(t.stream))),
    "create_topic": plain(302, lambda t: raw.create_topic_payload(t.world.s(t.stream), "t3", 1)),
    "delete_topic": plain(303, lambda t: raw.ident(t.world.s(t.stream)) + raw.ident(t.topic)),
    "update_topic": enc(304, lambda t: UpdateTopic(t.sid, t.tid, 1, 0, 0, 0, t.topic + "x")),
    "purge_topic": plain(305, lambda t: raw.ident(t.world.s(t.stream)) + raw.ident(t.topic)),
    "create_partitions": enc(402, lambda t: CreatePartitions(t.sid, t.tid, 1)),
    "delete_partitions": enc(403, lambda t: DeletePartitions(t.sid, t.tid, 1)),
    "delete_segments": enc(503, lambda t: DeleteSegments(t.sid, t.tid, 0, 1)),
    "get_consumer_group": enc(600, lambda t: GetConsumerGroup(t.sid, t.tid, Identifier("g"))),
    "get_consumer_groups": enc(601, lambda t: GetConsumerGroups(t.sid, t.tid)),
    "create_consumer_group": enc(602, lambda t: CreateConsumerGroup(t.sid, t.tid, "g2")),
    "delete_consumer_group": enc(603, lambda t: DeleteConsumerGroup(t.sid, t.tid, Identifier("g"))),
    "join_consumer_group": enc(604, lambda t: JoinConsumerGroup(t.sid, t.tid, Identifier("g"))),
    "leave_consumer_group": enc(605, lambda t: LeaveConsumerGroup(t.sid, t.tid, Identifier("g"))),
}
# commands whose successful call needs an earlier call on the same connection
PRELUDE = {"leave_consumer_group": "join_consumer_group"}
# the status a permitted call answers when it is not 0
PERMITTED_STATUS: dict[str, int] = {}

# -- the table -----------------------------------------------------------------------------
G, S, T = "global", "stream", "topic"


@dataclass(frozen=True)
class Row:
    command: str
    scope: str          # G: no stream/topic in the grant; S: grant on stream A; T: on A/t1
    flags: tuple[str, ...]
    near_miss: Perms = field(default_factory=Perms)

    def grant(self, w: World) -> Perms:
        if self.scope == G:
            return Perms(set(self.flags))
        if self.scope == S:
            return Perms(streams={w.streams["A"]: set(self.flags)})
        return Perms(topics={(w.streams["A"], w.topics[("A", "t1")]): set(self.flags)})


def rows() -> list[Row]:
    out = []
    for cmd in ("get_stats", "get_snapshot_file", "get_client", "get_clients"):
        out += [Row(cmd, G, ("read_servers",), Perms({"manage_users", "manage_streams"})),
                Row(cmd, G, ("manage_servers",))]
    for cmd in ("get_user", "get_users"):
        out += [Row(cmd, G, ("read_users",), Perms({"read_servers", "read_streams"})),
                Row(cmd, G, ("manage_users",))]
    for cmd in ("create_user", "delete_user", "update_user", "update_permissions",
                "change_password"):
        out.append(Row(cmd, G, ("manage_users",), Perms({"read_users", "manage_servers"})))
    out += [
        Row("get_streams", G, ("read_streams",), Perms({"read_topics", "read_users"})),
        Row("create_stream", G, ("manage_streams",), Perms({"read_streams", "manage_topics"})),
        Row("get_stream", G, ("read_streams",), Perms({"read_topics"})),
        Row("get_stream", S, ("read_stream",), Perms(streams={0: {"read_stream"}})),
        Row("get_topics", S, ("read_topics",), Perms({"poll_messages", "send_messages"})),
        Row("get_topics", G, ("read_topics",)),
        Row("create_topic", S, ("manage_topics",), Perms({"read_topics"})),
        Row("create_topic", G, ("manage_topics",)),
    ]
    for cmd in ("update_stream", "purge_stream", "delete_stream"):
        out += [Row(cmd, S, ("manage_stream",), Perms({"read_streams", "manage_topics"})),
                Row(cmd, G, ("manage_streams",))]
    for cmd in ("get_topic", "get_consumer_group", "get_consumer_groups", "create_consumer_group",
                "delete_consumer_group", "join_consumer_group", "leave_consumer_group"):
        out += [Row(cmd, T, ("read_topic",), Perms({"poll_messages", "send_messages"})),
                Row(cmd, S, ("read_topics",))]
    for cmd in ("update_topic", "purge_topic", "delete_topic", "create_partitions",
                "delete_partitions", "delete_segments"):
        out += [Row(cmd, T, ("manage_topic",), Perms({"read_topics", "send_messages"})),
                Row(cmd, S, ("manage_topics",))]
    for cmd in ("poll_messages", "get_consumer_offset", "store_consumer_offset",
                "delete_consumer_offset"):
        out += [Row(cmd, T, ("poll_messages",), Perms({"send_messages", "read_servers"})),
                Row(cmd, S, ("poll_messages",)), Row(cmd, T, ("read_topic",)),
                Row(cmd, G, ("poll_messages",))]
    for cmd in ("send_messages", "flush_unsaved_buffer"):
        out += [Row(cmd, T, ("send_messages",), Perms({"poll_messages", "read_topics"})),
                Row(cmd, S, ("send_messages",)), Row(cmd, G, ("send_messages",))]
    return out


ROWS = rows()


def test_table_covers_every_permissioned_command() -> None:
    from lurcher.core.shard.dispatch import build_table
    permissioned = {r.spec.name for r in build_table().values() if r.permission}
    assert permissioned == {row.command for row in ROWS} == set(COMMAND)


def denied_targets(row: Row, w: World) -> list[Target]:
    if row.scope == S:
        return [Target(w, "B", "t1")]
    if row.scope == T:
        return [Target(w, "B", "t1"), Target(w, "A", "t2")]
    return []


def login_new_user(server: LurcherServer, root: UserClient, w: World, perms: Perms,
                   tag: str) -> UserClient:
    username = f"{tag}-{w.n}"
    root.create_user(username, "user-password", perms)
    client = UserClient(server.tcp_address)
    client.login_as(username, "user-password")
    return client


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.command}-{r.scope}-{'+'.join(r.flags)}")
def test_permission(row: Row, server: LurcherServer, root: UserClient) -> None:
    w = build_world(root)
    user = login_new_user(server, root, w, row.grant(w), "u")
    other = login_new_user(server, root, w, row.near_miss, "m")
    try:
        w.client_id = user.me()["client_id"]
        build = COMMAND[row.command]
        a1 = Target(w, "A", "t1")
        assert other.status_of(*build(a1)) == UNAUTHORIZED, "near-miss grant was accepted"
        for target in denied_targets(row, w):
            assert user.status_of(*build(target)) == UNAUTHORIZED, \
                f"grant on A/t1 leaked to {target.stream}/{target.topic}"
        if row.command in PRELUDE:
            assert user.status_of(*COMMAND[PRELUDE[row.command]](a1)) == 0
        assert user.status_of(*build(a1)) == PERMITTED_STATUS.get(row.command, 0)
    finally:
        user.close()
        other.close()


def test_permission_changes_apply_to_open_sessions(server: LurcherServer, root: UserClient) -> None:
    w = build_world(root)
    user = login_new_user(server, root, w, Perms(), "live")
    try:
        get_stream = COMMAND["get_stream"](Target(w, "A", "t1"))
        assert user.status_of(*get_stream) == UNAUTHORIZED
        root.set_perms(f"live-{w.n}", Perms(streams={w.streams["A"]: {"read_stream"}}))
        assert user.status_of(*get_stream) == 0
        root.set_perms(f"live-{w.n}", None)
        assert user.status_of(*get_stream) == UNAUTHORIZED
    finally:
        user.close()


def test_user_without_permissions_reads_itself_only(server: LurcherServer, root: UserClient) -> None:
    w = build_world(root)
    user = login_new_user(server, root, w, Perms(), "self")
    try:
        me = user.get_user(f"self-{w.n}")
        assert me is not None and me.username == f"self-{w.n}"
        assert user.get_user(me.id) == me
        assert user.status_of(31, raw.ident(0)) == UNAUTHORIZED
        assert user.status_of(31, raw.ident(999)) == UNAUTHORIZED  # no existence oracle
        assert user.status_of(32) == UNAUTHORIZED
    finally:
        user.close()


def listed_names(user: UserClient, code: int, payload: bytes = b"") -> set[str]:
    """Names in a GetStreams/GetTopics answer (both headers end with name(u8); the fixed
    parts are 33 and 51 bytes)."""
    body, fixed, names = user.call(code, payload), {201: 33, 301: 51}[code], set()
    pos = 0
    while pos < len(body):
        length = body[pos + fixed - 1]
        names.add(body[pos + fixed:pos + fixed + length].decode())
        pos += fixed + length
    return names


def test_lists_show_only_what_the_user_may_read(server: LurcherServer, root: UserClient) -> None:
    w = build_world(root)
    a, t1 = w.streams["A"], w.topics[("A", "t1")]
    stream_reader = login_new_user(server, root, w, Perms(streams={a: {"read_stream"}}), "ls")
    topic_reader = login_new_user(server, root, w, Perms(topics={(a, t1): {"read_topic"}}), "lt")
    try:
        assert listed_names(stream_reader, 201) == {w.s("A")}
        assert listed_names(topic_reader, 301, raw.ident(a)) == {"t1"}
        assert topic_reader.status_of(301, raw.ident(w.streams["B"])) == UNAUTHORIZED
        assert topic_reader.status_of(201) == UNAUTHORIZED  # reads no stream as a whole
        assert len(listed_names(root, 201)) >= 2
    finally:
        stream_reader.close()
        topic_reader.close()
