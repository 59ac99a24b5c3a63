"""A node's replication port against an unauthenticated peer: bytes that are not a
handshake (garbage, or a well-formed hello followed by a flood) are refused, the
connection is closed after at most a few KiB, and the node keeps serving its clients with
its memory unchanged; a connection that never completes its handshake is closed."""

from __future__ import annotations

import re
import socket
import struct
from pathlib import Path

from tests.support.cluster import observer, running_cluster

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


def replication_port(root: Path) -> int:
    text = (root / "node-0.toml").read_text()
    return int(re.search(r"replication_port = (\d+)", text).group(1))


async def test_pre_handshake_floods_are_cut_off_and_the_node_keeps_serving(tmp_path: Path) -> None:
    with running_cluster(tmp_path, 1) as [node]:
        client = await observer(node)
        await client.ping()
        port, before = replication_port(tmp_path), rss_kib(node.pid)
        idle = socket.create_connection(("127.0.0.1", port), timeout=LIVENESS_S)
        hello = struct.pack("<4sBB16sB", b"LRCL", 1, 5, bytes(16), 12) + b"test-cluster"
        for first in (b"GET / HTTP/1.1\r\n\r\n", hello) * 3:
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
