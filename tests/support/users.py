"""Raw-frame builders and parsers for the user, permission and personal-access-token commands.

Written straight from the wire reference (§3, §10) with ``struct``, like ``raw``: it is the
oracle the server's codecs are checked against, so it does not import ``lurcher.core.wire``.
``Perms`` describes a permissions blob by flag names; ``UserClient`` adds the commands to a
``RawClient``.
"""

from __future__ import annotations

import dataclasses
import struct

from tests.support.raw import PeerClosed, RawClient, ident, login_payload, name

GET_ME = 20
GET_CLIENT = 21
GET_CLIENTS = 22
GET_USER = 31
GET_USERS = 32
CREATE_USER = 33
DELETE_USER = 34
UPDATE_USER = 35
UPDATE_PERMISSIONS = 36
CHANGE_PASSWORD = 37
LOGIN_USER = 38
LOGOUT_USER = 39
GET_PATS = 41
CREATE_PAT = 42
DELETE_PAT = 43
LOGIN_PAT = 44

GLOBAL_FLAGS = ("manage_servers", "read_servers", "manage_users", "read_users",
                "manage_streams", "read_streams", "manage_topics", "read_topics",
                "poll_messages", "send_messages")
STREAM_FLAGS = ("manage_stream", "read_stream", "manage_topics", "read_topics",
                "poll_messages", "send_messages")
TOPIC_FLAGS = ("manage_topic", "read_topic", "poll_messages", "send_messages")

ACTIVE = 1
INACTIVE = 2
DISCONNECTED = 8  # the status of the frame a server sends before it ends a connection
U64_MAX = 0xFFFF_FFFF_FFFF_FFFF


def _flags(names: tuple[str, ...], granted: set[str]) -> bytes:
    unknown = granted - set(names)
    if unknown:
        raise ValueError(f"unknown flags {sorted(unknown)}")
    return bytes(1 if n in granted else 0 for n in names)


@dataclasses.dataclass
class Perms:
    """Granted flag names: ``global_``; ``streams[sid]``; ``topics[(sid, tid)]``."""

    global_: set[str] = dataclasses.field(default_factory=set)
    streams: dict[int, set[str]] = dataclasses.field(default_factory=dict)
    topics: dict[tuple[int, int], set[str]] = dataclasses.field(default_factory=dict)

    def blob(self) -> bytes:
        """The §10.3 permissions blob (streams and topics in ascending id order)."""
        out = bytearray(_flags(GLOBAL_FLAGS, self.global_))
        stream_ids = sorted(set(self.streams) | {s for s, _ in self.topics})
        out.append(1 if stream_ids else 0)
        for i, sid in enumerate(stream_ids):
            out += struct.pack("<I", sid) + _flags(STREAM_FLAGS, self.streams.get(sid, set()))
            topic_ids = sorted(t for s, t in self.topics if s == sid)
            out.append(1 if topic_ids else 0)
            for j, tid in enumerate(topic_ids):
                out += struct.pack("<I", tid) + _flags(TOPIC_FLAGS, self.topics[(sid, tid)])
                out.append(1 if j + 1 < len(topic_ids) else 0)
            out.append(1 if i + 1 < len(stream_ids) else 0)
        return bytes(out)


def optional_perms(blob: bytes | None) -> bytes:
    return b"\x00" if blob is None else b"\x01" + struct.pack("<I", len(blob)) + blob


def create_user_payload(username: str | bytes, password: str | bytes, status: int = ACTIVE,
                        perms: bytes | None = None) -> bytes:
    return name(username) + name(password) + bytes([status]) + optional_perms(perms)


def update_user_payload(user: int | str, username: str | None = None,
                        status: int | None = None) -> bytes:
    out = ident(user)
    out += b"\x00" if username is None else b"\x01" + name(username)
    out += b"\x00" if status is None else bytes([1, status])
    return out


def update_permissions_payload(user: int | str, perms: bytes | None) -> bytes:
    return ident(user) + optional_perms(perms)


def change_password_payload(user: int | str, current: str, new: str) -> bytes:
    return ident(user) + name(current) + name(new)


def create_pat_payload(token_name: str | bytes, expiry_us: int = 0) -> bytes:
    return name(token_name) + struct.pack("<Q", expiry_us)


@dataclasses.dataclass(frozen=True)
class User:
    id: int
    created_at: int
    status: int
    username: str
    perms: bytes | None = None


def parse_user_header(buf: bytes, pos: int = 0) -> tuple[User, int]:
    uid, created, status, n = struct.unpack_from("<IQBB", buf, pos)
    start = pos + 14
    return User(uid, created, status, buf[start:start + n].decode()), start + n


def parse_user_details(buf: bytes) -> User:
    user, pos = parse_user_header(buf)
    if buf[pos] == 0:
        assert buf[pos:] == b"\x00\x00\x00\x00", buf[pos:]
        return user
    (n,) = struct.unpack_from("<I", buf, pos + 1)
    blob = buf[pos + 5:]
    assert len(blob) == n
    return dataclasses.replace(user, perms=blob)


def parse_user_list(buf: bytes) -> list[User]:
    out, pos = [], 0
    while pos < len(buf):
        user, pos = parse_user_header(buf, pos)
        out.append(user)
    return out


def parse_pats(buf: bytes) -> list[tuple[str, int]]:
    out, pos = [], 0
    while pos < len(buf):
        n = buf[pos]
        token_name = buf[pos + 1:pos + 1 + n].decode()
        (expiry_at,) = struct.unpack_from("<Q", buf, pos + 1 + n)
        out.append((token_name, expiry_at))
        pos += 1 + n + 8
    return out


def parse_client(buf: bytes, pos: int = 0) -> tuple[dict, int]:
    client_id, user_id, transport, n = struct.unpack_from("<IIBI", buf, pos)
    address = buf[pos + 13:pos + 13 + n].decode()
    (groups,) = struct.unpack_from("<I", buf, pos + 13 + n)
    return ({"client_id": client_id, "user_id": user_id, "transport": transport,
             "address": address, "groups": groups}, pos + 17 + n)


class UserClient(RawClient):
    """``RawClient`` plus the user and token commands. ``call`` raises StatusError."""

    def status_of(self, code: int, payload: bytes = b"") -> int:
        return self.request(code, payload).status

    def login_as(self, username: str, password: str) -> int:
        return struct.unpack("<I", self.call(LOGIN_USER, login_payload(username, password)))[0]

    def login_token(self, token: str) -> int:
        return struct.unpack("<I", self.call(LOGIN_PAT, name(token)))[0]

    def create_user(self, username: str, password: str, perms: Perms | None = None,
                    status: int = ACTIVE) -> User:
        blob = None if perms is None else perms.blob()
        return parse_user_details(self.call(CREATE_USER,
                                            create_user_payload(username, password, status, blob)))

    def get_user(self, user: int | str) -> User | None:
        payload = self.call(GET_USER, ident(user))
        return parse_user_details(payload) if payload else None

    def get_users(self) -> list[User]:
        return parse_user_list(self.call(GET_USERS))

    def set_perms(self, user: int | str, perms: Perms | None) -> None:
        self.call(UPDATE_PERMISSIONS,
                  update_permissions_payload(user, None if perms is None else perms.blob()))

    def create_token(self, token_name: str, expiry_us: int = 0) -> str:
        payload = self.call(CREATE_PAT, create_pat_payload(token_name, expiry_us))
        assert payload[0] == len(payload) - 1
        return payload[1:].decode()

    def tokens(self) -> list[tuple[str, int]]:
        return parse_pats(self.call(GET_PATS))

    def me(self) -> dict:
        return parse_client(self.call(GET_ME))[0]

    def ended_by_server(self, timeout_s: float = 10) -> bool:
        """The server ended this connection as it ends one of a removed login: one
        Disconnected frame, unasked, then the close."""
        if self.read_response(timeout_s=timeout_s).status != DISCONNECTED:
            return False
        try:
            self.read_response(timeout_s=timeout_s)
        except PeerClosed:
            return True
        return False

