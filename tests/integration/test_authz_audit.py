"""Authorization audit: stale credentials against real servers, over raw TCP and HTTP.

* A JWT issued to a user keeps no power once that user is deleted, even when a later user
  gets the same id (ids are reused): over HTTP it is 401, and over TCP the deleted user's
  session is ended (sound already); a JWT from a personal-access-token login ends with that
  token, as a TCP session logged in with it does.
* With several shards, a session on any shard stops acting once its user is deactivated or
  deleted, or once the personal access token it logged in with is deleted: the command that
  did it runs on shard 0, so the other shards must end their sessions too (disconnected,
  as shard 0 does, so a consumer-group member among them leaves its group).
* An HTTP request is run with its token's login checked again once its body is in: a user
  replaced (deleted, its id given to another) while it sent the body does not run it as the
  other user.
* A user manager whose permission is revoked while its CreateUser or ChangePassword hashes
  a password changes nothing.
* Grants on a deleted stream or topic go with it: ids are given out again, and the next
  stream or topic created must not be readable by whoever could read the deleted one.
"""

from __future__ import annotations

import struct
import time

import httpx
import pytest

from tests.support import raw
from tests.support.server import LurcherServer, ServerFactory
from tests.support.users import (
    CHANGE_PASSWORD,
    CREATE_USER,
    DELETE_PAT,
    DELETE_USER,
    GET_ME,
    INACTIVE,
    UPDATE_USER,
    Perms,
    UserClient,
    change_password_payload,
    create_user_payload,
    update_user_payload,
)

CHEAP_ARGON2 = {"LURCHER_AUTH_ARGON2_TIME_COST": "1", "LURCHER_AUTH_ARGON2_MEMORY_COST_KIB": "1024"}
HTTP_ON = {**CHEAP_ARGON2, "LURCHER_HTTP_ENABLED": "true", "LURCHER_HTTP_ADDRESS": "127.0.0.1:0"}
SHARDS = 2
UNAUTHENTICATED = 40


def root_client(server: LurcherServer) -> UserClient:
    client = UserClient(server.tcp_address)
    client.login_as("iggy", "iggy")
    return client


def http_login(base: str, username: str, password: str) -> str:
    answer = httpx.post(f"{base}/users/login", json={"username": username, "password": password})
    assert answer.status_code == 200, answer.text
    return answer.json()["access_token"]["token"]


def http_get(base: str, token: str, path: str) -> httpx.Response:
    return httpx.get(f"{base}{path}", headers={"authorization": f"Bearer {token}"})


def test_a_deleted_users_jwt_does_not_act_as_the_user_that_reuses_its_id(
        server_factory: ServerFactory) -> None:
    server = server_factory(HTTP_ON)
    base = f"http://{server.endpoints['http']}"
    with root_client(server) as root:
        root.create_stream("secret-stream")
        mallory = root.create_user("mallory", "mallory-pw")
        stale = http_login(base, "mallory", "mallory-pw")
        assert http_get(base, stale, "/streams").status_code == 403  # no read rights
        with UserClient(server.tcp_address) as tcp:
            tcp.login_as("mallory", "mallory-pw")
            root.call(DELETE_USER, raw.ident(mallory.id))
            admin = root.create_user("admin2", "admin2-pw", Perms({"read_streams",
                                                                    "manage_users"}))
            assert admin.id == mallory.id  # the freed id is reused
            # TCP: the deleted user's session was ended with it
            assert tcp.status_of(GET_ME) != 0
        assert http_get(base, stale, "/streams").status_code == 401
        assert http_get(base, stale, "/users").status_code == 401
        refreshed = httpx.post(f"{base}/users/refresh-token", json={"token": stale})
        assert refreshed.status_code == 401
        # the new user's own tokens work
        fresh = http_login(base, "admin2", "admin2-pw")
        assert http_get(base, fresh, "/streams").status_code == 200


def client_on(server: LurcherServer, shard: int, username: str, password: str = "",
              token: str | None = None) -> UserClient:
    """A client logged in as ``username`` (or with ``token``) whose connection is on ``shard``."""
    for _ in range(200):
        client = UserClient(server.tcp_address)
        if token is None:
            client.login_as(username, password)
        else:
            client.login_token(token)
        if struct.unpack_from("<I", client.call(GET_ME))[0] % SHARDS == shard:
            return client
        client.close()
    pytest.fail(f"no connection landed on shard {shard}")


def test_sessions_on_other_shards_end_with_their_user_or_token(
        server_factory: ServerFactory) -> None:
    server = server_factory({**CHEAP_ARGON2, "LURCHER_SYSTEM_SHARDING_SHARDS": str(SHARDS)})
    with root_client(server) as root:
        root.create_stream("s")
        for name in ("ivan", "judy", "kim"):
            root.create_user(name, f"{name}-pw", Perms({"read_streams"}))
        ivan = client_on(server, 1, "ivan", "ivan-pw")
        judy = client_on(server, 1, "judy", "judy-pw")
        with client_on(server, 1, "kim", "kim-pw") as kim_pw:
            token = kim_pw.create_token("tok1")
            kim = client_on(server, 1, "kim", token=token)
            assert kim.status_of(raw.GET_STREAMS) == 0
            kim_pw.call(DELETE_PAT, raw.name("tok1"))
            assert kim_pw.status_of(raw.GET_STREAMS) == 0  # the password session stays
        assert ivan.status_of(raw.GET_STREAMS) == 0 and judy.status_of(raw.GET_STREAMS) == 0
        root.call(UPDATE_USER, update_user_payload("ivan", status=INACTIVE))
        judy_id = root.get_user("judy").id
        root.call(DELETE_USER, raw.ident("judy"))
        # judy's id goes to a new user: judy's session on shard 1 must not act as it
        assert root.create_user("leo", "leo-pw", Perms({"read_streams"})).id == judy_id
        assert ivan.ended_by_server()
        assert judy.ended_by_server()
        assert kim.ended_by_server()
        for client in (ivan, judy, kim):
            client.close()


def test_a_jwt_from_a_token_login_ends_with_the_token(server_factory: ServerFactory) -> None:
    server = server_factory(HTTP_ON)
    base = f"http://{server.endpoints['http']}"
    with root_client(server) as root:
        root.create_user("nina", "nina-pw", Perms({"read_streams"}))
    with UserClient(server.tcp_address) as nina:
        nina.login_as("nina", "nina-pw")
        token = nina.create_token("ci-token")
        answer = httpx.post(f"{base}/personal-access-tokens/login", json={"token": token})
        assert answer.status_code == 200, answer.text
        from_token = answer.json()["access_token"]["token"]
        from_password = http_login(base, "nina", "nina-pw")
        assert http_get(base, from_token, "/streams").status_code == 200
        with UserClient(server.tcp_address) as by_token:
            by_token.login_token(token)
            nina.call(DELETE_PAT, raw.name("ci-token"))
            assert by_token.status_of(raw.GET_STREAMS) != 0  # TCP: ended with its token
        assert http_get(base, from_token, "/streams").status_code == 401
        refreshed = httpx.post(f"{base}/users/refresh-token", json={"token": from_token})
        assert refreshed.status_code == 401
        assert http_get(base, from_password, "/streams").status_code == 200


DELETE_STREAM, DELETE_TOPIC = 203, 303
UNAUTHORIZED = 41


def test_grants_on_a_deleted_stream_or_topic_do_not_pass_to_the_next_one_given_its_id(
        server_factory: ServerFactory) -> None:
    server = server_factory(HTTP_ON)
    base = f"http://{server.endpoints['http']}"
    with root_client(server) as root:
        old = root.create_stream("old-project")
        keep = root.create_stream("shared")
        old_topic = root.create_topic("shared", "scratch", 1)
        root.create_topic("shared", "visible", 1)
        root.create_user("olga", "olga-pw", Perms(
            streams={old: {"read_stream", "poll_messages"}},
            topics={(keep, old_topic): {"read_topic", "poll_messages"}}))
        with UserClient(server.tcp_address) as tcp:
            tcp.login_as("olga", "olga-pw")
            jwt = http_login(base, "olga", "olga-pw")
            assert tcp.status_of(raw.GET_STREAM, raw.ident("old-project")) == 0
            root.call(DELETE_STREAM, raw.ident(old))
            root.call(DELETE_TOPIC, raw.ident(keep) + raw.ident(old_topic))
            assert root.create_stream("payroll") == old  # the freed ids are given out again
            assert root.create_topic("shared", "salaries", 1) == old_topic
            root.send("payroll", root.create_topic("payroll", "t", 1), raw.partition_id(0),
                      [raw.message(b"salary")])
            root.send("shared", "salaries", raw.partition_id(0), [raw.message(b"salary")])
            assert tcp.status_of(raw.GET_STREAM, raw.ident("payroll")) == UNAUTHORIZED
            assert tcp.status_of(raw.GET_TOPIC, raw.ident("shared") +
                                 raw.ident("salaries")) == UNAUTHORIZED
            for stream, topic in (("payroll", "t"), ("shared", "salaries")):
                poll = raw.poll_payload(stream, topic, 0, raw.STRATEGY_FIRST, 0, 10)
                assert tcp.status_of(raw.POLL_MESSAGES, poll) == UNAUTHORIZED
                answer = http_get(base, jwt, f"/streams/{stream}/topics/{topic}/messages"
                                  "?consumer_id=1&partition_id=0&kind=first&count=10")
                assert answer.status_code == 403, answer.text
            assert http_get(base, jwt, "/streams/payroll").status_code == 403
            # what the user record shows: no grant left on the deleted ids
            assert root.get_user("olga").perms == Perms(streams={keep: set()}).blob()


async def test_a_request_whose_body_arrives_after_its_user_was_replaced_is_refused(
        server_factory: ServerFactory) -> None:
    """The bearer token is checked when the headers arrive; the command runs once the body
    is in. A user deleted meanwhile, its id given to another user, must not run it as that
    user (here: a user manager creating an all-powerful user)."""
    import asyncio
    import json
    server = server_factory(HTTP_ON)
    base = f"http://{server.endpoints['http']}"
    with root_client(server) as root:
        root.create_user("pat", "pat-pw")
        jwt = http_login(base, "pat", "pat-pw")
        body = json.dumps({"username": "backdoor", "password": "backdoor-pw", "status": "active",
                           "permissions": None}).encode()
        headers_sent = asyncio.Event()

        async def slow_body():
            yield body[:5]
            headers_sent.set()
            await asyncio.sleep(1.0)
            yield body[5:]

        async with httpx.AsyncClient(base_url=base) as http:
            pending = asyncio.create_task(http.post(
                "/users", content=slow_body(), headers={
                    "authorization": f"Bearer {jwt}", "content-type": "application/json",
                    "content-length": str(len(body))}))
            await headers_sent.wait()
            await asyncio.sleep(0.3)
            pat_id = root.get_user("pat").id
            await asyncio.to_thread(root.call, DELETE_USER, raw.ident("pat"))
            admin = await asyncio.to_thread(root.create_user, "quinn", "quinn-pw",
                                            Perms({"manage_users"}))
            assert admin.id == pat_id
            answer = await pending
        assert answer.status_code == 401, answer.text
        assert root.get_user("backdoor") is None


def test_a_user_manager_revoked_while_its_change_hashes_changes_nothing(
        server_factory: ServerFactory) -> None:
    """CreateUser and ChangePassword hash off the event loop (here ~0.5 s a hash): a
    revocation of manage_users meanwhile must stop the change, as it stops any later
    command."""
    server = server_factory({"LURCHER_AUTH_ARGON2_TIME_COST": "24"})
    with root_client(server) as root:
        root.create_user("manager", "manager-pw", Perms({"manage_users"}))
        with UserClient(server.tcp_address) as mu:
            mu.login_as("manager", "manager-pw")
            mu.send_frame(CREATE_USER, create_user_payload("sneaky", "sneaky-pw"))
            time.sleep(0.1)
            root.set_perms("manager", None)
            assert mu.read_response(timeout_s=30).status == UNAUTHORIZED
            # the same for another user's password (the manager knows the current one)
            root.create_user("victim", "victim-pw")
            root.set_perms("manager", Perms({"manage_users"}))
            mu.send_frame(CHANGE_PASSWORD,
                          change_password_payload("victim", "victim-pw", "taken-over"))
            time.sleep(0.1)
            root.set_perms("manager", None)
            assert mu.read_response(timeout_s=30).status == UNAUTHORIZED
        assert root.get_user("sneaky") is None
        with UserClient(server.tcp_address) as victim:
            victim.login_as("victim", "victim-pw")


def test_a_token_deleted_while_a_forwarded_change_hashes_stops_it(
        server_factory: ServerFactory) -> None:
    """CreateUser from a session on shard 1 runs on shard 0, forwarded with the session's
    login: the token it logged in with, deleted while the password hashes (~0.5 s), stops
    the change there as it would on shard 0 (the forwarded session carried only the user
    id, so the recheck after the hash passed and the user was created)."""
    server = server_factory({"LURCHER_AUTH_ARGON2_TIME_COST": "24",
                             "LURCHER_SYSTEM_SHARDING_SHARDS": str(SHARDS)})
    with root_client(server) as root:
        root.create_user("manager", "manager-pw", Perms({"manage_users"}))
    with UserClient(server.tcp_address) as by_password:
        by_password.login_as("manager", "manager-pw")
        token = by_password.create_token("ci-token")
        with client_on(server, 1, "manager", token=token) as by_token:
            by_token.send_frame(CREATE_USER, create_user_payload("sneaky", "sneaky-pw"))
            time.sleep(0.1)
            by_password.call(DELETE_PAT, raw.name("ci-token"))
            assert by_token.read_response(timeout_s=30).status == UNAUTHENTICATED
    with root_client(server) as root:
        assert root.get_user("sneaky") is None


GET_GROUP, CREATE_GROUP, JOIN_GROUP = 600, 602, 604


def group_members(client: UserClient) -> int:
    reply = client.call(GET_GROUP, raw.ident("s") + raw.ident("t") + raw.ident("g"))
    return struct.unpack_from("<III", reply)[2]


def test_a_deleted_users_group_member_on_another_shard_leaves_its_group(
        server_factory: ServerFactory) -> None:
    """Its connection on shard 1 is ended, so its membership is dropped (it held the
    group's partitions for as long as the client stayed connected)."""
    server = server_factory({**CHEAP_ARGON2, "LURCHER_SYSTEM_SHARDING_SHARDS": str(SHARDS)})
    with root_client(server) as root:
        root.create_stream("s")
        root.create_topic("s", "t", 2)
        root.call(CREATE_GROUP, raw.ident("s") + raw.ident("t") + raw.name("g"))
        root.create_user("member", "member-pw", Perms({"read_streams", "poll_messages"}))
        with client_on(server, 1, "member", "member-pw") as member:
            member.call(JOIN_GROUP, raw.ident("s") + raw.ident("t") + raw.ident("g"))
            assert group_members(root) == 1
            root.call(DELETE_USER, raw.ident("member"))
            assert member.ended_by_server()
        for _ in range(100):  # bounded: 10 s (the shard tells the owner its client left)
            if group_members(root) == 0:
                break
            time.sleep(0.1)
        assert group_members(root) == 0


@pytest.mark.parametrize("shards", [1, SHARDS])
@pytest.mark.parametrize("change", ["delete", "deactivate"])
def test_a_user_that_ends_its_own_login_leaves_its_groups_at_once(
        server_factory: ServerFactory, shards: int, change: str) -> None:
    """The caller of the change stays connected (it gets its answer), logged out: it
    leaves its groups all the same, so its partitions go to a member that can poll them
    (the old code kept them with it until the login deadline, here 10 min). With two shards
    it is on shard 1: that shard ends its session while it awaits the answer from shard 0."""
    server = server_factory({**CHEAP_ARGON2, "LURCHER_SYSTEM_SHARDING_SHARDS": str(shards),
                             "LURCHER_LIMITS_LOGIN_TIMEOUT": "10 min"})
    group = raw.ident("s") + raw.ident("t") + raw.ident("g")
    with root_client(server) as root:
        root.create_stream("s")
        root.create_topic("s", "t", 2)
        root.call(CREATE_GROUP, raw.ident("s") + raw.ident("t") + raw.name("g"))
        root.create_user("quitter", "quitter-pw", Perms({"manage_users", "read_streams",
                                                         "poll_messages"}))
        with client_on(server, shards - 1, "quitter", "quitter-pw") as quitter:
            quitter.call(JOIN_GROUP, group)
            root.call(JOIN_GROUP, group)
            assert group_members(root) == 2
            if change == "delete":
                quitter.call(DELETE_USER, raw.ident("quitter"))
            else:
                quitter.call(UPDATE_USER, update_user_payload("quitter", status=INACTIVE))
            for _ in range(100):  # bounded: 10 s (with two shards, shard 1 tells shard 0)
                if group_members(root) == 1:
                    break
                time.sleep(0.1)
            assert group_members(root) == 1
            assert quitter.status_of(GET_ME) == UNAUTHENTICATED   # still connected
