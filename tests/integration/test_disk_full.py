"""A real server whose data directory is a small tmpfs, filled until the disk is full.

Checked: every refused write (a send, a stream or topic creation) answers
CANNOT_WRITE_TO_FILE (10006) and changes nothing; the server keeps answering pings, logins
and reads while full; every acknowledged operation (streams, messages, byte for byte and in
order) survives a SIGKILL + restart and a clean restart, and nothing refused appears; after
space is freed, by remounting the tmpfs bigger or by deleting a topic over the API while the
disk is still full, writes succeed again. 1 and 2 shards, and 1 shard writing segment
files O_DIRECT (tmpfs takes O_DIRECT on this project's kernels; where it does not, the
server logs one line and writes through the page cache).

The tmpfs is mounted by the test (root or CAP_SYS_ADMIN needed); where mounting is not
permitted the test is skipped and says why.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support import admin, tmpfs
from tests.support.raw import (GET_STREAM, GET_STREAMS, RawClient, StatusError, ident,
                               message, partition_id)
from tests.support.server import LurcherServer

pytestmark = pytest.mark.slow

CANNOT_WRITE_TO_FILE = 10006
DISK_SIZE = "3m"
BIGGER_DISK_SIZE = "4m"
TOPICS = 3
BATCH_MESSAGES = 10
PAYLOAD_BYTES = 3000
MAX_BATCHES = 2000
LIVENESS_S = 60.0


@dataclass
class Ledger:
    """What the server acknowledged: stream names and, per stream id, message payloads."""

    streams: dict[str, int] = field(default_factory=dict)
    messages: dict[int, list[bytes]] = field(default_factory=dict)
    refusals: int = 0
    sequence: int = 0

    def payloads(self, sid: int, count: int) -> list[bytes]:
        self.sequence += 1
        return [f"{sid}:{self.sequence}:{i}:".encode().ljust(PAYLOAD_BYTES, b".")
                for i in range(count)]


class TmpfsServer(LurcherServer):
    """A server over a tmpfs data dir whose output goes to the regular disk."""

    def __init__(self, output: Path) -> None:
        super().__init__()
        self._output = output

    @property
    def output_path(self) -> Path:
        return self._output


@pytest.fixture
def disk(tmp_path: Path):
    with tmpfs.mounted(tmp_path / "disk", DISK_SIZE) as mount_point:
        yield mount_point


@pytest.fixture(params=[(1, False), (2, False), (1, True)],
                ids=["1shard", "2shards", "1shard-direct"])
def full_server(request, disk: Path, tmp_path: Path):
    shards, direct_io = request.param
    server = TmpfsServer(tmp_path / "server-output.txt")
    server.start(disk / "data", {"LURCHER_SYSTEM_SHARDING_SHARDS": str(shards),
                                 "LURCHER_SYSTEM_SEGMENT_DIRECT_IO": str(direct_io).lower()})
    try:
        yield server
    finally:
        if server.running:
            server.kill()


def refused(call) -> bool:
    """Run ``call``; False when acknowledged, True when refused for lack of space."""
    try:
        call()
    except StatusError as exc:
        assert exc.status == CANNOT_WRITE_TO_FILE, f"refused with status {exc.status}"
        return True
    return False


def send(client: RawClient, ledger: Ledger, sid: int, count: int = BATCH_MESSAGES) -> bool:
    """Send one batch to stream ``sid``'s topic; True when acknowledged (and recorded)."""
    payloads = ledger.payloads(sid, count)
    if refused(lambda: client.send(sid, 0, partition_id(0), [message(p) for p in payloads])):
        ledger.refusals += 1
        return False
    ledger.messages[sid].extend(payloads)
    return True


def create_stream(client: RawClient, ledger: Ledger, name: str, topic: bool = True) -> bool:
    def call() -> None:
        sid = client.create_stream(name)
        ledger.streams[name] = sid
        if topic:
            client.create_topic(sid, "t", 1)
            ledger.messages[sid] = []
    if refused(call):
        ledger.refusals += 1
        return False
    return True


def fill(client: RawClient, ledger: Ledger) -> None:
    """Send until sends are refused, then create streams until that is refused too."""
    sids = sorted(ledger.messages)
    for i in range(MAX_BATCHES):
        if not send(client, ledger, sids[i % len(sids)]):
            break
    else:
        pytest.fail(f"the disk never filled after {MAX_BATCHES} batches")
    for sid in sids:  # every partition is refused now, even with a single message
        send(client, ledger, sid, 1)
    for width in (200, 40, 1):  # leave the metadata log's last page as full as possible
        for i in range(500):
            name = f"late-{len(ledger.streams)}-{i}".ljust(width, "x")
            if not create_stream(client, ledger, name, topic=False):
                break
        else:
            pytest.fail("stream creations were never refused on a full disk")


def assert_answers_while_full(server: LurcherServer, ledger: Ledger) -> None:
    with RawClient(server.tcp_address) as client:
        client.ping()
        client.login()
        assert client.call(GET_STREAMS) != b""
        for name, sid in ledger.streams.items():
            assert client.call(GET_STREAM, ident(name)) != b""
            if ledger.messages.get(sid):
                first = client.poll(sid, 0, 0, count=1).messages
                assert [m.payload for m in first] == ledger.messages[sid][:1]


def assert_everything_acknowledged_kept(server: LurcherServer, ledger: Ledger) -> None:
    with RawClient(server.tcp_address) as client:
        client.login()
        for name, sid in ledger.streams.items():
            assert client.call(GET_STREAM, ident(name)) != b"", f"stream {name!r} lost"
        for sid in ledger.messages:
            stored = [m.payload for m in client.poll_all(sid, 0, 0)]
            assert stored == ledger.messages[sid], f"stream {sid}: messages differ"


def retry_until_acknowledged(action) -> None:
    deadline = time.monotonic() + LIVENESS_S
    while not action():
        assert time.monotonic() < deadline, "writes still refused after space was freed"
        time.sleep(0.1)


def test_full_disk_refuses_cleanly_keeps_everything_and_recovers(full_server, disk: Path):
    server, ledger = full_server, Ledger()
    with RawClient(server.tcp_address) as client:
        client.login()
        for i in range(TOPICS):
            assert create_stream(client, ledger, f"s{i}")
        fill(client, ledger)
    assert ledger.refusals >= 2
    assert_answers_while_full(server, ledger)

    server.kill()
    tmpfs.resize(disk, BIGGER_DISK_SIZE)
    server.restart()
    assert_everything_acknowledged_kept(server, ledger)
    with RawClient(server.tcp_address) as client:
        client.login()
        assert create_stream(client, ledger, "after-remount")
        assert send(client, ledger, ledger.streams["after-remount"])
        fill(client, ledger)
        victim = ledger.streams["s0"]
        admin.delete_topic(client, victim, 0)  # answered while the disk is full
        del ledger.messages[victim]  # the stream stays, without its topic
        retry_until_acknowledged(lambda: send(client, ledger, ledger.streams["s1"]))
        retry_until_acknowledged(lambda: create_stream(client, ledger, "after-delete"))
    server.restart()
    assert_everything_acknowledged_kept(server, ledger)
