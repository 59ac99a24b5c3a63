"""Issue 14, point 10, against real servers (1 and 2 shards).

* Per-connection login back-off, with the ``auth.login_*`` keys set through the
  environment: wrong logins on ONE connection, each for a different username (so the
  per-user back-off never applies), take at least the configured back-off, and a second
  connection keeps being answered meanwhile. Parallel guesses of one username cannot queue
  it out: attempts beyond the maximum wait are refused at once, the owner still logs in.
* Data files are created 0600 and directories 0700 (``system.umask`` "077"), including
  segments, indexes, the metadata log and ``runtime/endpoints.json``; ``system.umask =
  "022"`` restores world-readable files. An invalid mask is a one-line start-up error.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support import raw
from tests.support.raw import RawClient
from tests.support.server import REPO_ROOT, LurcherServer, ServerFactory

INVALID_CREDENTIALS = 42
BACKOFF_ENV = {"LURCHER_AUTH_LOGIN_FREE_ATTEMPTS": "1",
               "LURCHER_AUTH_LOGIN_BACKOFF_BASE": "300 ms",
               "LURCHER_AUTH_LOGIN_BACKOFF_MAX": "1 s"}


@pytest.mark.parametrize("shards", [1, 2])
def test_wrong_logins_on_one_connection_are_backed_off(
        server_factory: ServerFactory, shards: int) -> None:
    server = server_factory({**BACKOFF_ENV, "LURCHER_SYSTEM_SHARDING_SHARDS": str(shards)})
    attempts = 5
    minimum_s = 0.3 + 0.6 + 1.0 + 1.0  # attempts 2..5 after 1 free failure, capped at 1 s
    pings: list[float] = []
    done = threading.Event()

    def bystander() -> None:
        with RawClient(server.endpoints["tcp"]) as other:
            while not done.is_set():
                other.ping()
                pings.append(time.monotonic())
                time.sleep(0.05)

    watcher = threading.Thread(target=bystander)
    watcher.start()
    try:
        started = time.monotonic()
        with RawClient(server.endpoints["tcp"], timeout_s=60.0) as c:
            for i in range(attempts):
                c.send_frame(raw.LOGIN_USER, raw.login_payload(f"nobody{i}", "wrong"))
                assert c.read_response(timeout_s=60.0).status == INVALID_CREDENTIALS
            elapsed = time.monotonic() - started
            c.login()  # the right password still works on the same connection
        assert elapsed >= minimum_s, f"{attempts} wrong logins took {elapsed:.2f} s"
        assert len([t for t in pings if t > started]) >= 2  # served meanwhile
    finally:
        done.set()
        watcher.join(30)


def server_made(root: Path) -> list[Path]:
    """Every file and directory the server created under its data directory."""
    return [p for p in root.rglob("*") if p.name != "server-output.txt"]


def write_some_data(server: LurcherServer) -> None:
    with RawClient(server.endpoints["tcp"]) as c:
        c.login()
        c.create_stream("s")
        c.create_topic("s", "t", 2)
        for partition in (0, 1):
            c.send_frame(raw.SEND_MESSAGES, raw.send_messages_payload(
                "s", "t", raw.partition_id(partition), [raw.message(b"hello")]))
            assert c.read_response().status == 0


@pytest.mark.parametrize("shards", [1, 2])
def test_data_is_private_by_default(server_factory: ServerFactory, tmp_path: Path,
                                    shards: int) -> None:
    data = tmp_path / "private"
    server = server_factory({"LURCHER_SYSTEM_SHARDING_SHARDS": str(shards)}, data_dir=data)
    write_some_data(server)
    made = server_made(data)
    assert any(p.suffix == ".log" for p in made) and any(p.suffix == ".index" for p in made)
    assert data / "runtime" / "endpoints.json" in made
    loose = [(str(p), oct(stat.S_IMODE(p.stat().st_mode))) for p in made
             if stat.S_IMODE(p.stat().st_mode) & 0o077]
    assert loose == []


def test_umask_is_configurable_and_checked(server_factory: ServerFactory,
                                           tmp_path: Path) -> None:
    data = tmp_path / "shared"
    server = server_factory({"LURCHER_SYSTEM_UMASK": "022"}, data_dir=data)
    write_some_data(server)
    segments = [p for p in server_made(data) if p.suffix == ".log"]
    assert segments and all(stat.S_IMODE(p.stat().st_mode) == 0o644 for p in segments)
    bad = subprocess.run(
        [sys.executable, "-m", "lurcher.server"], capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "LURCHER_SYSTEM_UMASK": "9z",
             "LURCHER_SYSTEM_PATH": str(tmp_path / "never")})
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "lurcher-server: configuration error: system.umask: not an octal mask: '9z'"]


def test_a_umask_masking_the_owner_is_refused_in_one_line(tmp_path: Path) -> None:
    """"700" made every data file and directory mode 000: the old code started (as root it
    even ran), and a server not running as root could not open again what it had made (the
    metadata log at its next start, a segment the descriptor cache reopens) (found by the
    docs audit)."""
    bad = subprocess.run(
        [sys.executable, "-m", "lurcher.server"], capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "LURCHER_SYSTEM_UMASK": "700",
             "LURCHER_TCP_ADDRESS": "127.0.0.1:0", "LURCHER_HTTP_ENABLED": "false",
             "LURCHER_QUIC_ENABLED": "false", "LURCHER_WEBSOCKET_ENABLED": "false",
             "LURCHER_SYSTEM_PATH": str(tmp_path / "never")})
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "lurcher-server: configuration error: system.umask: '700' takes the owner's own "
        "permissions away (its first digit must be 0: the server reopens its files)"]
    assert not (tmp_path / "never").exists()


def test_parallel_guesses_cannot_queue_a_user_out(server_factory: ServerFactory) -> None:
    """After 2 failures, 12 parallel wrong logins for root: each is answered 42 (those
    beyond the 1 s maximum wait at once and unchecked, logged); afterwards the right
    password still logs in."""
    server = server_factory(BACKOFF_ENV)
    statuses: list[int] = []
    for _ in range(2):
        with RawClient(server.endpoints["tcp"], timeout_s=60.0) as c:
            c.send_frame(raw.LOGIN_USER, raw.login_payload("iggy", "wrong"))
            assert c.read_response(timeout_s=60.0).status == INVALID_CREDENTIALS

    def guess() -> None:
        with RawClient(server.endpoints["tcp"], timeout_s=60.0) as c:
            c.send_frame(raw.LOGIN_USER, raw.login_payload("iggy", "wrong"))
            statuses.append(c.read_response(timeout_s=60.0).status)

    threads = [threading.Thread(target=guess) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert statuses == [INVALID_CREDENTIALS] * 12
    assert "login refused unchecked" in server.log_tail(20_000)
    with RawClient(server.endpoints["tcp"], timeout_s=60.0) as c:
        assert c.login() == 0
