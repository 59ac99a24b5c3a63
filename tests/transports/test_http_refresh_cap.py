"""Token refreshes per user are capped (``[http.jwt] max_refreshes_per_user``), on a real
server over HTTP.

A refresh needs only a valid token, no password, and revokes the token it replaces, whose
id is kept (in memory and in ``state/tokens``) for a whole token lifetime: one client
refreshing in a loop (about 500 a second) grew both without bound for an hour (found by an
adversarial probe). Now a user whose refreshes keep the cap's worth of ids revoked is
answered 401 until they expire; other users are not touched, and the restarted server
still counts them.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.support.server import LurcherServer
from tests.transports.conftest import ALL_ON, _serve

CAP = 5


@pytest.fixture(scope="module")
def capped_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LurcherServer]:
    env = {**ALL_ON, "LURCHER_HTTP_JWT_MAX_REFRESHES_PER_USER": str(CAP)}
    yield from _serve(tmp_path_factory.mktemp("refresh"), env)


def new_user(name: str) -> dict[str, str]:
    """A CreateUser body for ``name`` (password ``<name>-pw``)."""
    return {"username": name, "password": f"{name}-pw", "status": "active"}


def _token(http: httpx.Client, username: str, password: str) -> str:
    r = http.post("/users/login", json={"username": username, "password": password})
    assert r.status_code == 200, r.text
    return r.json()["access_token"]["token"]


def _refresh(http: httpx.Client, token: str) -> httpx.Response:
    return http.post("/users/refresh-token", json={"token": token})


def _refresh_up_to_the_cap(http: httpx.Client, token: str) -> str:
    for _ in range(CAP):
        r = _refresh(http, token)
        assert r.status_code == 200, r.text
        token = r.json()["access_token"]["token"]
    return token


def test_refreshes_beyond_the_cap_are_refused(capped_server: LurcherServer) -> None:
    with httpx.Client(base_url=f"http://{capped_server.endpoints['http']}") as http:
        root = _token(http, "iggy", "iggy")
        r = http.post("/users", json=new_user("refresher"),
                      headers={"Authorization": f"Bearer {root}"})
        assert r.status_code == 200, r.text
        token = _refresh_up_to_the_cap(http, _token(http, "refresher", "refresher-pw"))
        assert _refresh(http, token).status_code == 401
        own = http.get(f"/users/{r.json()['id']}", headers={"Authorization": f"Bearer {token}"})
        assert own.status_code == 200, own.text  # the last token still serves
        assert _refresh(http, root).status_code == 200  # another user's refresh
    capped_server.restart()
    with httpx.Client(base_url=f"http://{capped_server.endpoints['http']}") as http:
        assert _refresh(http, token).status_code == 401
    assert "Traceback" not in capped_server.log_tail()


def test_refused_refreshes_of_a_deleted_users_tokens_do_not_count(
        capped_server: LurcherServer) -> None:
    """A deleted user's tokens are refused on refresh (401), and that refusal must not use
    up the refreshes of the user later given the same id: the refresh was counted (and its
    token revoked) before the login was checked, so the deleted user's old tokens locked
    the new user out of refreshing for a token lifetime."""
    with httpx.Client(base_url=f"http://{capped_server.endpoints['http']}") as http:
        root = {"Authorization": f"Bearer {_token(http, 'iggy', 'iggy')}"}
        gone = http.post("/users", json=new_user("gone"),
                         headers=root)
        assert gone.status_code == 200, gone.text
        stale = [_token(http, "gone", "gone-pw") for _ in range(CAP)]
        assert http.delete(f"/users/{gone.json()['id']}", headers=root).status_code == 204
        heir = http.post("/users", json=new_user("heir"),
                         headers=root)
        assert heir.json()["id"] == gone.json()["id"]  # the freed id is reused
        assert [_refresh(http, token).status_code for token in stale] == [401] * CAP
        _refresh_up_to_the_cap(http, _token(http, "heir", "heir-pw"))


def test_a_user_given_a_deleted_users_id_does_not_inherit_its_refreshes(
        capped_server: LurcherServer) -> None:
    """Refreshes were counted per user id, and ids are reused after a delete: a user who
    refreshed up to the cap and was deleted left the next user given its id refused (401)
    on its first refresh, for a token lifetime. The count is now the login's (user id and
    creation time)."""
    with httpx.Client(base_url=f"http://{capped_server.endpoints['http']}") as http:
        root = {"Authorization": f"Bearer {_token(http, 'iggy', 'iggy')}"}
        first = http.post("/users", json=new_user("first"),
                          headers=root)
        assert first.status_code == 200, first.text
        _refresh_up_to_the_cap(http, _token(http, "first", "first-pw"))
        assert http.delete(f"/users/{first.json()['id']}", headers=root).status_code == 204
        second = http.post("/users", json=new_user("second"),
                           headers=root)
        assert second.json()["id"] == first.json()["id"]  # the freed id is reused
        r = _refresh(http, _token(http, "second", "second-pw"))
        assert r.status_code == 200, r.text
    assert "Traceback" not in capped_server.log_tail()
