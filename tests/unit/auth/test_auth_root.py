"""auth.root: the root user is created once; later environment values change nothing."""

from __future__ import annotations

from pathlib import Path

from lurcher.auth.passwords import Passwords
from lurcher.auth.root import DEFAULT_ROOT_USERNAME, ROOT_USER_ID, ensure_root
from lurcher.core.meta.store import MetaStore
from lurcher.core.wire.values.permissions import Permissions

PASSWORDS = Passwords(time_cost=1, memory_cost_kib=64, parallelism=1)


def open_store(path: Path) -> MetaStore:
    return MetaStore(path / "state" / "log")


def test_first_start_uses_environment_and_later_starts_ignore_it(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    env = {"LURCHER_ROOT_USERNAME": "admin", "LURCHER_ROOT_PASSWORD": "first-secret"}
    assert ensure_root(store, PASSWORDS.hash, env, False, 123) is None
    store.close()

    store = open_store(tmp_path)
    changed = {"LURCHER_ROOT_USERNAME": "other", "LURCHER_ROOT_PASSWORD": "second-secret"}
    assert ensure_root(store, PASSWORDS.hash, changed, True, 456) is None
    users = store.state.users
    assert list(users) == [ROOT_USER_ID]
    root = users[ROOT_USER_ID]
    assert (root.username, root.status, root.created_at) == ("admin", 1, 123)
    assert PASSWORDS.verify(root.password_hash, "first-secret")
    assert not PASSWORDS.verify(root.password_hash, "second-secret")
    assert Permissions.decode(root.permissions)[0] == Permissions.root()
    store.close()


def test_default_credentials(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    assert ensure_root(store, PASSWORDS.hash, {}, True, 0) is None
    root = store.state.users[ROOT_USER_ID]
    assert root.username == DEFAULT_ROOT_USERNAME
    assert PASSWORDS.verify(root.password_hash, "iggy")
    store.close()


def test_generated_password_is_returned_once(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    generated = ensure_root(store, PASSWORDS.hash, {}, False, 0)
    assert generated and len(generated) >= 20
    assert PASSWORDS.verify(store.state.users[ROOT_USER_ID].password_hash, generated)
    assert ensure_root(store, PASSWORDS.hash, {}, False, 0) is None
    store.close()
