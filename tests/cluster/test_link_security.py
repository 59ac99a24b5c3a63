"""A node's replication port against an unauthenticated peer: bytes that are not a
handshake (garbage, or a well-formed hello followed by a flood) are refused, the
connection is closed after at most a few KiB, and the node keeps serving its clients with
its memory unchanged; a connection that never completes its handshake is dropped, and at
most ``cluster.max_handshaking_links`` may be handshaking at once (more are dropped before
the node says hello)."""

from __future__ import annotations

import asyncio
import re
import socket
import time
from contextlib import ExitStack
from pathlib import Path

from lurcher.cluster.config import ClusterConfig
from lurcher.cluster.links import REFUSAL_LOG_S, Links
from lurcher.core.replication.codec import encode_parts
from lurcher.core.replication.link import (
    FRAME_HEADER, HELLO_FIXED, MAGIC, VERSION, Established, PeerLink,
)
from lurcher.core.replication.messages import Commit
from tests.support.cluster import observer, running_cluster
from tests.support.server import free_ports

FLOOD = 32 * 1024 * 1024  # what an attacker tries to push through one connection
LIVENESS_S = 10.0  # a bound on waiting for the close, not a performance figure


def rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status).group(1))


def flood(port: int, first: bytes) -> int:
    """Send ``first`` then zeros until the node closes the connection (or ``FLOOD`` bytes
    went); the bytes sent. The loopback's socket buffers take a few MiB after the node
    stopped reading, hence the margin; a node that kept reading would take the flood and
    never close (the recv times out)."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=LIVENESS_S) as sock:
        chunk = first + bytes(64 * 1024 - len(first))
        try:
            while sent < FLOOD:
                sock.sendall(chunk)
                sent += len(chunk)
                chunk = bytes(64 * 1024)
            while sock.recv(65536):  # the node's hello, then its close
                pass
        except (ConnectionResetError, BrokenPipeError):
            pass
    return sent


def replication_port(root: Path, node: int = 0) -> int:
    text = (root / f"node-{node}.toml").read_text()
    return int(re.search(r"replication_port = (\d+)", text).group(1))


HELLO_BYTES = HELLO_FIXED.size + len("test-cluster")  # the node's hello to every peer


def hello_as(index: int, nonce: bytes = bytes(16)) -> bytes:
    """A hello claiming to be node ``index``: anyone can write one, no secret in it."""
    return HELLO_FIXED.pack(MAGIC, VERSION, index, nonce, 12) + b"test-cluster"


def receive(sock: socket.socket, count: int) -> bytes:
    """Up to ``count`` bytes, fewer when the node closes first."""
    got = b""
    try:
        while len(got) < count and (chunk := sock.recv(count - len(got))):
            got += chunk
    except ConnectionResetError:
        pass
    return got


def hello_or_dropped(port: int, source: str = "127.0.0.1") -> socket.socket | None:
    """A connection to ``port`` from ``source`` once the node's hello arrived on it, or None
    when the node dropped it without a hello (bounded by ``LIVENESS_S``)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=LIVENESS_S,
                                    source_address=(source, 0))
    got = receive(sock, HELLO_BYTES)
    if len(got) == HELLO_BYTES:
        return sock
    sock.close()
    assert got == b"", f"a partial hello: {got!r}"
    return None


def still_open(sock: socket.socket) -> bool:
    """No close from the node (bytes waiting, or none yet): the connection is still held."""
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except ConnectionResetError:
        return False
    finally:
        sock.settimeout(LIVENESS_S)


def closed_within(sock: socket.socket, bound_s: float) -> bool:
    deadline = time.monotonic() + bound_s
    while still_open(sock):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


async def test_connections_beyond_the_handshaking_cap_are_dropped(tmp_path: Path) -> None:
    cap = ClusterConfig().max_handshaking_links  # the default, with its 5 s deadline
    with running_cluster(tmp_path, 1) as [node], ExitStack() as stack:
        port = replication_port(tmp_path)
        held = [hello_or_dropped(port) for _ in range(cap)]
        assert all(held), "a connection under the cap was dropped"
        for sock in held:
            stack.enter_context(sock)
        assert [hello_or_dropped(port) for _ in range(8)] == [None] * 8
        assert all(still_open(sock) for sock in held), "the cap dropped the earlier ones"
        held.pop().close()  # a slot frees once the node sees the close
        deadline = time.monotonic() + LIVENESS_S
        while (sock := hello_or_dropped(port)) is None:
            assert time.monotonic() < deadline, "no slot freed by a closed connection"
        stack.enter_context(sock)
        client = await observer(node)
        await client.create_stream("still-serving")
        await client.close()
        assert "cluster.max_handshaking_links" in node.output_path.read_text()


async def test_strangers_at_the_cap_do_not_lock_the_members_out(tmp_path: Path) -> None:
    """Connections from a host that is no member's (127.0.0.2; the nodes are 127.0.0.1)
    fill the cap; a connection from a member's host still gets its handshake."""
    with running_cluster(tmp_path, 2, "max_handshaking_links = 4\n"), ExitStack() as stack:
        port = replication_port(tmp_path)
        strangers = [hello_or_dropped(port, "127.0.0.2") for _ in range(4)]
        assert all(strangers)
        for sock in strangers:
            stack.enter_context(sock)
        assert hello_or_dropped(port, "127.0.0.2") is None
        member = hello_or_dropped(port)
        assert member is not None, "a member's host was locked out by strangers"
        stack.enter_context(member)


async def test_a_trickled_handshake_is_dropped_at_the_configured_deadline(tmp_path: Path) -> None:
    with running_cluster(tmp_path, 1, "handshake_timeout_ms = 300\n") as [node]:
        sock = hello_or_dropped(replication_port(tmp_path))
        assert sock is not None
        with sock:
            try:
                for byte in hello_as(5)[:-1]:  # one byte every 50 ms, never the whole hello
                    if not still_open(sock):
                        break
                    sock.sendall(bytes([byte]))
                    time.sleep(0.05)
            except (ConnectionResetError, BrokenPipeError):
                pass
            assert closed_within(sock, LIVENESS_S), "the trickle was never cut off"
        assert "no handshake within 0.3s" in node.output_path.read_text()


async def test_pre_handshake_floods_are_cut_off_and_the_node_keeps_serving(tmp_path: Path) -> None:
    with running_cluster(tmp_path, 1) as [node]:
        client = await observer(node)
        await client.ping()
        port, before = replication_port(tmp_path), rss_kib(node.pid)
        idle = socket.create_connection(("127.0.0.1", port), timeout=LIVENESS_S)
        for first in (b"GET / HTTP/1.1\r\n\r\n", hello_as(5)) * 3:
            assert flood(port, first) < FLOOD, "the node kept reading a flood"
        await client.ping()
        await client.create_stream("still-serving")
        assert (await client.get_stream("still-serving")) is not None
        await client.close()
        assert rss_kib(node.pid) - before < 16 * 1024, "the floods grew the node's memory"
        assert "cluster link refused" in node.output_path.read_text()
        with idle:  # connected, never says hello: closed after HANDSHAKE_TIMEOUT_S
            while idle.recv(65536):
                pass
        assert "no handshake within" in node.output_path.read_text()


async def test_a_node_cannot_be_made_to_prove_another_nodes_identity(tmp_path: Path) -> None:
    """Without the secret: dial node 0 and node 1, give node 1 the nonce node 0 sent, pass
    node 1's proof to node 0 claiming to be node 1, then send node 0 a frame. Node 0 must
    refuse the proof, not read the frame as node 1's."""
    with running_cluster(tmp_path, 2) as [node0, _]:
        with socket.create_connection(("127.0.0.1", replication_port(tmp_path, 0)),
                                      timeout=LIVENESS_S) as to0, \
             socket.create_connection(("127.0.0.1", replication_port(tmp_path, 1)),
                                      timeout=LIVENESS_S) as to1:
            nonce0 = receive(to0, HELLO_BYTES)[6:6 + 16]
            to1.sendall(hello_as(0, nonce0))
            proof1 = receive(to1, HELLO_BYTES + 32)[HELLO_BYTES:]
            assert len(proof1) == 32
            to0.sendall(hello_as(1) + proof1 + FRAME_HEADER.pack(6, 0) + b"\xff\x00")
            assert closed_within(to0, LIVENESS_S)
        log = node0.output_path.read_text()
        assert "from node 1" not in log, "node 0 read the frame as node 1's"
        assert "node 1 failed authentication" in log


def authenticated_as(port: int, index: int, then: object = None) -> socket.socket:
    """A connection to ``port`` that proved, with the cluster's secret, to be node ``index``
    (the dialing end of a link, as a node would); ``then``: a message sent as a frame in
    the same write as the proof."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=LIVENESS_S)
    link = PeerLink("test-cluster", b"s3cret", index, bytes(range(16)), dialer=True)
    sock.sendall(link.hello())
    proof = b""  # the node sends its proof without waiting for ours
    while not link.established:
        events = link.receive_data(receive(sock, 1) or b"")
        proof += link.take_output()
        assert link.failed is False and (events == [] or events == [Established(0)])
    sock.sendall(proof + (link.send(0, then) if then is not None else b""))
    return sock


async def test_a_node_keeps_one_link_from_each_member_and_none_from_strangers(
        tmp_path: Path) -> None:
    """With the secret, a peer could open any number of links claiming any index: each a
    descriptor held for ever (as is the link of a member that crashed without a close).
    The newest link from a member replaces the older; an index outside the cluster is
    refused."""
    with running_cluster(tmp_path, 2) as [node0, node1]:
        node1.kill()  # its index is ours to claim
        port = replication_port(tmp_path, 0)
        with authenticated_as(port, 1) as first, authenticated_as(port, 1) as second:
            assert closed_within(first, LIVENESS_S), "the older link from node 1 was kept"
            assert still_open(second)
        with authenticated_as(port, 7) as stranger:
            assert closed_within(stranger, LIVENESS_S), "a link from node 7 was kept"
        assert "node 7 is not a member" in node0.output_path.read_text()


async def test_nothing_is_delivered_from_a_refused_link(tmp_path: Path) -> None:
    """A link refused once authenticated (here: as node 7, no member) must not hand on
    the frames that came in the same read as its proof."""
    delivered: list = []
    links = Links("test-cluster", b"s3cret", 0, {1: ("127.0.0.1", free_ports(1)[0])},
                  lambda *message: delivered.append(message), 1 << 20)
    await links.start("127.0.0.1", 0)
    try:
        stranger = await asyncio.to_thread(authenticated_as, links.port, 7, Commit(0, 1, 0))
        with stranger:
            assert await asyncio.to_thread(closed_within, stranger, LIVENESS_S)
    finally:
        await links.close()
    assert delivered == [], delivered


async def test_a_flood_of_refused_connections_does_not_log_a_line_each(tmp_path: Path) -> None:
    """Each connection refused before its handshake logged a warning: a loop of bad
    connections grew the log as fast as it could connect."""
    with running_cluster(tmp_path, 1) as [node]:
        port = replication_port(tmp_path)
        for i in range(FLOODED := 200):
            if i == FLOODED - 1:
                time.sleep(REFUSAL_LOG_S)  # the last one is logged, with the count
            with socket.create_connection(("127.0.0.1", port), timeout=LIVENESS_S) as sock:
                sock.sendall(b"GET / HTTP/1.1\r\n\r\n" + bytes(64))
                receive(sock, 1 << 20)  # the node's hello, then its close
        lines = node.output_path.read_text().count("cluster link refused: not a lurcher")
        assert 2 <= lines < FLOODED // 2, f"{lines} lines for {FLOODED} refusals"
        assert "more since the last such line" in node.output_path.read_text()


async def test_a_dialer_proves_nothing_to_a_node_it_did_not_dial(tmp_path: Path) -> None:
    """Someone holding a member's address (node 2's, here) is dialed by node 1 as node 2.
    If it answers with a hello claiming node 0's index and node 0's nonce, node 1 must not
    send the dialer's proof made for node 0: node 0 would take it, relayed, for node 1's."""
    delivered: list = []
    ports = free_ports(2)
    with socket.create_server(("127.0.0.1", 0)) as impostor:
        impostor.settimeout(LIVENESS_S)
        node0 = Links("test-cluster", b"s3cret", 0, {1: ("127.0.0.1", ports[1])},
                      lambda *message: delivered.append(message), 1 << 20)
        node1 = Links("test-cluster", b"s3cret", 1,
                      {0: ("127.0.0.1", ports[0]),
                       2: ("127.0.0.1", impostor.getsockname()[1])},
                      lambda *message: None, 1 << 20)
        await node0.start("127.0.0.1", ports[0])
        await node1.start("127.0.0.1", ports[1])

        def relay() -> bytes:
            dialed, _ = impostor.accept()  # node 1 dialing "node 2"
            with dialed, socket.create_connection(("127.0.0.1", ports[0]),
                                                  timeout=LIVENESS_S) as to0:
                dialed.settimeout(LIVENESS_S)
                receive(dialed, HELLO_BYTES)  # node 1's hello
                nonce0 = receive(to0, HELLO_BYTES)[6:6 + 16]
                dialed.sendall(hello_as(0, nonce0))
                proof1 = receive(dialed, 32)
                if len(proof1) == 32:  # relayed as node 1's, then a frame "from node 1"
                    body = b"".join(encode_parts(Commit(0, 1, 0)))
                    to0.sendall(hello_as(1) + proof1 + FRAME_HEADER.pack(len(body) + 4, 0)
                                + body)
                    time.sleep(0.5)  # only on the broken path: let node 0 read it
                return proof1

        try:
            proof1 = await asyncio.to_thread(relay)
        finally:
            await node1.close()
            await node0.close()
    assert delivered == [], "node 0 took the relayed proof for node 1's"
    assert proof1 == b"", "node 1 proved itself to node 0 on a link it dialed to node 2"
