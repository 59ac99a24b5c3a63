"""Users, sessions and personal access tokens against a real server over raw TCP.

Covers: every command of the wire table refused before login; user create/read/update/
delete with the root protections; password changes; sessions ended by delete, deactivate
and token deletion; the token lifecycle (create, login, expiry, delete, limits, cleaner);
persistence across restarts (including the root password from the environment); bad input
and a flood of wrong logins while another connection keeps being answered.
"""

from __future__ import annotations

import base64
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor


from lurcher.core.wire.commands import COMMANDS
from tests.support import raw
from tests.support.server import LurcherServer, ServerFactory
from tests.support.users import (
    ACTIVE,
    CHANGE_PASSWORD,
    CREATE_PAT,
    CREATE_USER,
    DELETE_PAT,
    DELETE_USER,
    GET_CLIENT,
    GET_CLIENTS,
    GET_USER,
    INACTIVE,
    LOGIN_PAT,
    LOGIN_USER,
    UPDATE_PERMISSIONS,
    UPDATE_USER,
    U64_MAX,
    Perms,
    UserClient,
    change_password_payload,
    create_pat_payload,
    create_user_payload,
    parse_client,
    update_permissions_payload,
    update_user_payload,
)

OK = 0
INVALID_COMMAND = 3
INVALID_FORMAT = 4
DISCONNECTED = 8
RESOURCE_NOT_FOUND = 20
UNAUTHENTICATED = 40
UNAUTHORIZED = 41
INVALID_CREDENTIALS = 42
INVALID_USERNAME = 43
INVALID_PASSWORD = 44
USER_ALREADY_EXISTS = 46
USER_INACTIVE = 47
CANNOT_DELETE_USER = 48
CANNOT_CHANGE_PERMISSIONS = 49
INVALID_PAT_NAME = 50
PAT_ALREADY_EXISTS = 51
PAT_LIMIT_REACHED = 52
INVALID_PAT = 53
PAT_EXPIRED = 54
INVALID_UTF8 = 81

CHEAP_ARGON2 = {"LURCHER_AUTH_ARGON2_TIME_COST": "1", "LURCHER_AUTH_ARGON2_MEMORY_COST_KIB": "1024"}
NO_CLEANER = {**CHEAP_ARGON2, "LURCHER_PERSONAL_ACCESS_TOKEN_CLEANER_ENABLED": "false"}


def root_client(server: LurcherServer) -> UserClient:
    client = UserClient(server.tcp_address)
    client.login_as("iggy", "iggy")
    return client


def logged_in(server: LurcherServer, username: str, password: str) -> UserClient:
    client = UserClient(server.tcp_address)
    client.login_as(username, password)
    return client


def ended(client: UserClient) -> bool:
    """The server sent Disconnected (8) and closed the connection."""
    return client.read_response(timeout_s=5).status == DISCONNECTED and client.closed_by_peer()


# -- before login --------------------------------------------------------------------------
PLAUSIBLE = {
    200: raw.ident(0), 300: raw.ident(0) + raw.ident(0), 202: raw.name("stream"),
    302: raw.create_topic_payload(0, "topic", 1), 31: raw.ident(0),
    33: create_user_payload("someone", "password"), 34: raw.ident(1),
    35: update_user_payload(1, "renamed"), 36: update_permissions_payload(1, None),
    37: change_password_payload(0, "iggy", "other"), 42: create_pat_payload("token"),
    43: raw.name("token"), 21: struct.pack("<I", 1),
    100: raw.poll_payload(0, 0, 0, raw.STRATEGY_OFFSET, 0, 1),
    101: raw.send_messages_payload(0, 0, raw.partition_id(0), [raw.message(b"x")]),
}


def test_every_command_is_refused_before_login_and_after_logout(server: LurcherServer) -> None:
    open_codes = {1, 38, 44}
    codes = sorted(set(COMMANDS) - open_codes)
    assert len(codes) == len(COMMANDS) - 3
    with UserClient(server.tcp_address) as client:
        for code in codes:
            assert client.status_of(code) == UNAUTHENTICATED, f"code {code} (empty payload)"
            if code in PLAUSIBLE:
                assert client.status_of(code, PLAUSIBLE[code]) == UNAUTHENTICATED, f"code {code}"
        client.ping()
        client.login_as("iggy", "iggy")
        assert client.status_of(raw.GET_STREAMS) == OK
        client.call(raw.LOGOUT_USER)
        for code in codes:
            assert client.status_of(code) == UNAUTHENTICATED, f"code {code} after logout"
        client.ping()


# -- users ---------------------------------------------------------------------------------
def test_user_lifecycle(server_factory: ServerFactory) -> None:
    server = server_factory(CHEAP_ARGON2)
    with root_client(server) as root:
        perms = Perms({"read_streams"}, streams={7: {"poll_messages"}},
                      topics={(7, 3): {"send_messages"}})
        alice = root.create_user("alice", "alice-pw", perms)
        assert (alice.id, alice.status, alice.username, alice.perms) == (1, ACTIVE, "alice", perms.blob())
        assert abs(alice.created_at - time.time() * 1e6) < 60e6
        assert root.get_user("alice") == alice == root.get_user(1)
        assert root.get_user(42) is None and root.get_user("nobody") is None
        assert [(u.id, u.username) for u in root.get_users()] == [(0, "iggy"), (1, "alice")]
        assert root.get_users()[1].perms is None  # headers only

        bob = root.create_user("bob", "bob-pw", status=INACTIVE)
        assert bob.perms is None and bob.status == INACTIVE
        assert root.status_of(CREATE_USER, create_user_payload("alice", "other-pw")) == USER_ALREADY_EXISTS
        with UserClient(server.tcp_address) as c:
            assert c.status_of(LOGIN_USER, raw.login_payload("bob", "bob-pw")) == USER_INACTIVE
            assert c.status_of(LOGIN_USER, raw.login_payload("bob", "wrong-pw")) == INVALID_CREDENTIALS
            root.call(UPDATE_USER, update_user_payload("bob", status=ACTIVE))
            assert c.login_as("bob", "bob-pw") == bob.id

        # rename: unique names, the old name is free afterwards
        assert root.status_of(UPDATE_USER, update_user_payload("bob", "alice")) == USER_ALREADY_EXISTS
        root.call(UPDATE_USER, update_user_payload("bob", "robert"))
        assert root.get_user("bob") is None and root.get_user("robert").id == bob.id
        root.call(UPDATE_USER, update_user_payload(bob.id, "robert"))  # same name: no-op

        root.set_perms("alice", None)
        assert root.get_user("alice").perms is None
        root.set_perms("alice", Perms({"manage_users"}))
        assert root.get_user("alice").perms == Perms({"manage_users"}).blob()

        # the root user is protected, even from another user manager
        with logged_in(server, "alice", "alice-pw") as admin:
            for client in (root, admin):
                assert client.status_of(DELETE_USER, raw.ident(0)) == CANNOT_DELETE_USER
                assert client.status_of(DELETE_USER, raw.ident("iggy")) == CANNOT_DELETE_USER
                deactivate = update_user_payload(0, status=INACTIVE)
                assert client.status_of(UPDATE_USER, deactivate) == CANNOT_DELETE_USER
                unrestrict = update_permissions_payload(0, None)
                assert client.status_of(UPDATE_PERMISSIONS, unrestrict) == CANNOT_CHANGE_PERMISSIONS
            admin.call(UPDATE_USER, update_user_payload(0, "root"))  # renaming root is allowed
            assert root.get_user(0).username == "root"
            admin.call(UPDATE_USER, update_user_payload("root", "iggy"))

        for missing in (raw.ident(99), raw.ident("ghost")):
            assert root.status_of(DELETE_USER, missing) == RESOURCE_NOT_FOUND
            assert root.status_of(UPDATE_USER, missing + b"\x00\x00") == RESOURCE_NOT_FOUND
            assert root.status_of(UPDATE_PERMISSIONS, missing + b"\x00") == RESOURCE_NOT_FOUND
        root.call(DELETE_USER, raw.ident("robert"))
        assert [u.username for u in root.get_users()] == ["iggy", "alice"]


def change(user: int | str, current: str, new: str) -> tuple[int, bytes]:
    return CHANGE_PASSWORD, change_password_payload(user, current, new)


def test_change_password_rules(server_factory: ServerFactory) -> None:
    server = server_factory(CHEAP_ARGON2)
    with root_client(server) as root:
        root.create_user("carol", "carol-pw")
        root.create_user("dave", "dave-pw")
        with logged_in(server, "carol", "carol-pw") as carol:
            # own password: no permission needed, the current password is
            assert carol.status_of(*change("carol", "nope-pw", "new-pw")) == INVALID_CREDENTIALS
            carol.call(CHANGE_PASSWORD, change_password_payload("carol", "carol-pw", "carol-pw2"))
            # another user's: manage_users needed, and it still proves the current password
            assert carol.status_of(*change("dave", "dave-pw", "x-pw")) == UNAUTHORIZED
        with UserClient(server.tcp_address) as c:
            assert c.status_of(LOGIN_USER, raw.login_payload("carol", "carol-pw")) == INVALID_CREDENTIALS
            assert c.login_as("carol", "carol-pw2") == 1
        assert root.status_of(*change("dave", "wrong-pw", "x-pw")) == INVALID_CREDENTIALS
        root.call(CHANGE_PASSWORD, change_password_payload(2, "dave-pw", "dave-pw2"))
        assert root.status_of(*change(99, "abc", "def")) == RESOURCE_NOT_FOUND
        assert root.status_of(*change(0, "iggy", "ab")) == INVALID_PASSWORD
        with logged_in(server, "dave", "dave-pw2"):
            pass


def test_delete_and_deactivate_end_sessions(server_factory: ServerFactory) -> None:
    server = server_factory(CHEAP_ARGON2)
    with root_client(server) as root:
        erin = root.create_user("erin", "erin-pw", Perms({"read_streams", "manage_users"}))
        sessions = [logged_in(server, "erin", "erin-pw") for _ in range(2)]
        bystander = root.create_user("frank", "frank-pw")
        with logged_in(server, "frank", "frank-pw") as frank:
            root.call(UPDATE_USER, update_user_payload("erin", status=INACTIVE))
            assert all(ended(s) for s in sessions)
            frank.ping()
            assert frank.me()["user_id"] == bystander.id

            root.call(UPDATE_USER, update_user_payload("erin", status=ACTIVE))
            sessions = [logged_in(server, "erin", "erin-pw") for _ in range(2)]
            root.call(DELETE_USER, raw.ident(erin.id))
            assert all(ended(s) for s in sessions)
            # the freed id is reused; nothing of erin's sessions carries over
            assert root.create_user("grace", "grace-pw").id == erin.id
            assert frank.me()["user_id"] == bystander.id

        # a user manager deleting itself gets its reply, then is logged out
        root.create_user("heidi", "heidi-pw", Perms({"manage_users"}))
        with logged_in(server, "heidi", "heidi-pw") as heidi:
            heidi.call(DELETE_USER, raw.ident("heidi"))
            assert heidi.status_of(raw.GET_STREAMS) == UNAUTHENTICATED
            heidi.ping()


def test_get_me_client_and_clients(server: LurcherServer) -> None:
    with UserClient(server.tcp_address) as anon, root_client(server) as root:
        anon.ping()
        me = root.me()
        assert me["user_id"] == 0 and me["transport"] == 1 and me["groups"] == 0
        host, port = root.sock.getsockname()[:2]
        assert me["address"] == f"{host}:{port}"
        clients = root.call(GET_CLIENTS)
        found, pos = {}, 0
        while pos < len(clients):
            c, pos = parse_client(clients, pos)
            found[c["client_id"]] = c
        assert found[me["client_id"]] == me
        assert 0xFFFF_FFFF in {c["user_id"] for c in found.values()}  # the anonymous one
        assert parse_client(root.call(GET_CLIENT, struct.pack("<I", me["client_id"])))[0] == me
        assert root.call(GET_CLIENT, struct.pack("<I", 999_999)) == b""
        assert root.status_of(GET_CLIENT, struct.pack("<I", 0)) == 101  # InvalidClientId


# -- personal access tokens ----------------------------------------------------------------
def test_token_lifecycle(server_factory: ServerFactory) -> None:
    server = server_factory(NO_CLEANER)
    with root_client(server) as root:
        ivan = root.create_user("ivan", "ivan-pw")
        with logged_in(server, "ivan", "ivan-pw") as owner:
            token = owner.create_token("ci-token")
            assert len(token) == 68 and len(base64.b64decode(token, validate=True)) == 50
            before_us = time.time() * 1e6
            short = owner.create_token("short", 3_000_000)
            never = owner.create_token("never", U64_MAX)
            listed = dict(owner.tokens())
            assert listed["ci-token"] == 0 and listed["never"] == 0
            assert before_us < listed["short"] < before_us + 60e6
            assert root.tokens() == []  # tokens are per user

            assert owner.status_of(CREATE_PAT, create_pat_payload("ci-token")) == PAT_ALREADY_EXISTS
            assert owner.status_of(CREATE_PAT, create_pat_payload("ab")) == INVALID_PAT_NAME
            assert owner.status_of(CREATE_PAT, create_pat_payload("x" * 31)) == INVALID_PAT_NAME

            with UserClient(server.tcp_address) as c:
                assert c.login_token(token) == ivan.id
                assert c.me()["user_id"] == ivan.id
                assert c.status_of(raw.GET_STREAMS) == UNAUTHORIZED  # ivan has no permissions
                assert c.login_token(short) == ivan.id
            with UserClient(server.tcp_address) as c:
                assert c.status_of(LOGIN_PAT, raw.name("not-a-token")) == INVALID_PAT
                assert c.status_of(LOGIN_PAT, raw.name(token[:-1] + "A")) == INVALID_PAT
                time.sleep(max(0.0, listed["short"] / 1e6 - time.time()) + 0.2)
                assert c.status_of(LOGIN_PAT, raw.name(short)) == PAT_EXPIRED
                assert c.status_of(raw.GET_STREAMS) == UNAUTHENTICATED
                assert c.login_token(never) == ivan.id

            # deleting a token refuses it from then on and ends the sessions it opened
            via_token = UserClient(server.tcp_address)
            via_token.login_token(token)
            with logged_in(server, "ivan", "ivan-pw") as via_password:
                owner.call(DELETE_PAT, raw.name("ci-token"))
                assert ended(via_token)
                via_password.ping()
                assert via_password.me()["user_id"] == ivan.id
            assert owner.status_of(DELETE_PAT, raw.name("ci-token")) == RESOURCE_NOT_FOUND
            with UserClient(server.tcp_address) as c:
                assert c.status_of(LOGIN_PAT, raw.name(token)) == INVALID_PAT
            assert sorted(n for n, _ in owner.tokens()) == ["never", "short"]

        # deleting the user deletes its tokens
        root.call(DELETE_USER, raw.ident("ivan"))
        with UserClient(server.tcp_address) as c:
            assert c.status_of(LOGIN_PAT, raw.name(never)) == INVALID_PAT


def test_token_limit_and_inactive_owner(server_factory: ServerFactory) -> None:
    server = server_factory({**NO_CLEANER, "LURCHER_PERSONAL_ACCESS_TOKEN_MAX_TOKENS_PER_USER": "3"})
    with root_client(server) as root:
        tokens = [root.create_token(f"tok{i}") for i in range(3)]
        assert root.status_of(CREATE_PAT, create_pat_payload("tok3")) == PAT_LIMIT_REACHED
        root.call(DELETE_PAT, raw.name("tok0"))
        root.create_token("tok3")
        root.create_user("judy", "judy-pw")
        with logged_in(server, "judy", "judy-pw") as judy:
            judy_token = judy.create_token("mine")
        root.call(UPDATE_USER, update_user_payload("judy", status=INACTIVE))
        with UserClient(server.tcp_address) as c:
            assert c.status_of(LOGIN_PAT, raw.name(judy_token)) == USER_INACTIVE
            assert c.login_token(tokens[1]) == 0


def test_expired_tokens_are_cleaned_up(server_factory: ServerFactory) -> None:
    server = server_factory({**CHEAP_ARGON2, "LURCHER_PERSONAL_ACCESS_TOKEN_CLEANER_INTERVAL": "200 ms"})
    with root_client(server) as root:
        root.create_token("brief", 300_000)
        root.create_token("lasting")
        deadline = time.monotonic() + 10
        while [n for n, _ in root.tokens()] != ["lasting"]:
            assert time.monotonic() < deadline, root.tokens()
            time.sleep(0.1)
        server.restart()
    with root_client(server) as root:
        assert [n for n, _ in root.tokens()] == ["lasting"]


# -- persistence ---------------------------------------------------------------------------
def test_restart_keeps_users_permissions_tokens_and_root_password(server_factory: ServerFactory) -> None:
    env = {**NO_CLEANER, "LURCHER_ROOT_PASSWORD": "first-root-secret"}
    server = server_factory(env, args=())
    perms = Perms({"read_users"}, streams={3: {"read_stream"}}, topics={(3, 1): {"poll_messages"}})
    with UserClient(server.tcp_address) as c:
        assert c.status_of(LOGIN_USER, raw.login_payload("iggy", "iggy")) == INVALID_CREDENTIALS
    with logged_in(server, "iggy", "first-root-secret") as root:
        kim = root.create_user("kim", "kim-pw", perms)
        root.create_user("lee", "lee-pw", status=INACTIVE)
        root.call(CHANGE_PASSWORD, change_password_payload("kim", "kim-pw", "kim-pw2"))
        root_token = root.create_token("root-token")
        before = root.get_users()
    with logged_in(server, "kim", "kim-pw2") as kim_client:
        kim_token = kim_client.create_token("kim-token", 3_600_000_000)
        kim_tokens = kim_client.tokens()

    for crash in (False, True):
        server.env["LURCHER_ROOT_PASSWORD"] = "second-root-secret"
        server.restart(crash=crash)
        with UserClient(server.tcp_address) as c:
            second = raw.login_payload("iggy", "second-root-secret")
            assert c.status_of(LOGIN_USER, second) == INVALID_CREDENTIALS
        with logged_in(server, "iggy", "first-root-secret") as root:
            assert root.get_users() == before
            assert root.get_user("kim") == kim
            assert root.get_user("lee").status == INACTIVE
            assert [n for n, _ in root.tokens()] == ["root-token"]
        with logged_in(server, "kim", "kim-pw2") as kim_client:
            assert kim_client.tokens() == kim_tokens
        with UserClient(server.tcp_address) as c:
            assert c.login_token(kim_token) == kim.id
            assert c.login_token(root_token) == 0


# -- bad input -----------------------------------------------------------------------------
def test_bad_user_input(server: LurcherServer) -> None:
    with root_client(server) as root:
        cases = [
            (CREATE_USER, create_user_payload("u" * 51, "password"), INVALID_USERNAME),
            (CREATE_USER, create_user_payload("ab", "password"), INVALID_USERNAME),
            (CREATE_USER, create_user_payload("okname", "p" * 101), INVALID_PASSWORD),
            (CREATE_USER, create_user_payload("okname", "pw"), INVALID_PASSWORD),
            (CREATE_USER, create_user_payload("okname", ""), INVALID_PASSWORD),
            (CREATE_USER, create_user_payload("okname", "password", status=3), INVALID_COMMAND),
            (CREATE_USER, create_user_payload(b"bad\xff\xfe", "password"), INVALID_UTF8),
            (CREATE_USER, create_user_payload("okname", b"pass\xc3"), INVALID_UTF8),
            (CREATE_USER, create_user_payload("okname", "password")[:-1], INVALID_COMMAND),
            (CREATE_USER, b"", INVALID_COMMAND),
            (CREATE_USER, create_user_payload("okname", "password", perms=b"\x01" * 5), INVALID_COMMAND),
            (CREATE_USER, create_user_payload("okname", "password")[:-1] + b"\x01\xff\x00\x00\x00"
             + Perms().blob(), INVALID_FORMAT),  # perm_len disagrees with the blob
            (UPDATE_USER, update_user_payload(0, "u" * 51), INVALID_USERNAME),
            (UPDATE_USER, update_user_payload(0, status=7), INVALID_COMMAND),
            (LOGIN_USER, raw.login_payload("u" * 51, "password"), INVALID_USERNAME),
            (LOGIN_USER, raw.login_payload("iggy", "p" * 101), INVALID_PASSWORD),
            (CHANGE_PASSWORD, change_password_payload(0, "iggy", "n" * 101), INVALID_PASSWORD),
            (CREATE_PAT, create_pat_payload(b"tok\xff"), INVALID_UTF8),
            (GET_USER, raw.ident_raw(1, b"\x00\x00", 2), INVALID_FORMAT),
        ]
        for code, payload, status in cases:
            assert root.status_of(code, payload) == status, (code, payload)
        root.ping()
        assert [u.username for u in root.get_users()] == ["iggy"]

        # any non-zero flag byte means "granted" (as the 0.8 decoder); stored normalised
        blob = bytearray(Perms({"read_streams"}, streams={5: {"read_stream"}}).blob())
        blob[5] = 2          # read_streams
        blob[11 + 4 + 1] = 7  # stream 5: read_stream
        root.call(CREATE_USER, create_user_payload("flags", "password", perms=bytes(blob)))
        assert root.get_user("flags").perms == Perms({"read_streams"}, streams={5: {"read_stream"}}).blob()
        # a has_permissions byte other than 1 means "no permissions" (trailing bytes ignored)
        root.call(CREATE_USER, create_user_payload("noflags", "password")[:-1] + b"\x02" + blob)
        assert root.get_user("noflags").perms is None


def test_login_flood_keeps_server_responsive(server: LurcherServer) -> None:
    stop = threading.Event()
    ping_times: list[float] = []

    def pinger() -> None:
        with UserClient(server.tcp_address) as c:
            while not stop.is_set():
                t0 = time.monotonic()
                c.ping()
                ping_times.append(time.monotonic() - t0)
                time.sleep(0.005)

    def wrong_login(i: int) -> int:
        with UserClient(server.tcp_address, timeout_s=60) as c:
            who = "iggy" if i % 2 else f"nobody{i}"
            return c.status_of(LOGIN_USER, raw.login_payload(who, f"wrong-password-{i}"))

    thread = threading.Thread(target=pinger)
    thread.start()
    try:
        with ThreadPoolExecutor(50) as pool:
            statuses = list(pool.map(wrong_login, range(50)))
    finally:
        stop.set()
        thread.join()
    assert statuses == [INVALID_CREDENTIALS] * 50
    assert len(ping_times) >= 5
    assert max(ping_times) < 1.0, f"ping stalled {max(ping_times):.3f}s during the flood"
    with root_client(server) as root:
        root.ping()
