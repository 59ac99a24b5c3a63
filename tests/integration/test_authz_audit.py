"""Authorization audit: stale credentials against real servers, over raw TCP and HTTP.

* A JWT issued to a user keeps no power once that user is deleted, even when a later user
  gets the same id (ids are reused): over HTTP it is 401, and over TCP the deleted user's
  session is ended (sound already).
"""

from __future__ import annotations

import httpx

from tests.support import raw
from tests.support.server import LurcherServer, ServerFactory
from tests.support.users import (
    DELETE_USER,
    GET_ME,
    Perms,
    UserClient,
)

CHEAP_ARGON2 = {"LURCHER_AUTH_ARGON2_TIME_COST": "1", "LURCHER_AUTH_ARGON2_MEMORY_COST_KIB": "1024"}
HTTP_ON = {**CHEAP_ARGON2, "LURCHER_HTTP_ENABLED": "true", "LURCHER_HTTP_ADDRESS": "127.0.0.1:0"}


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
