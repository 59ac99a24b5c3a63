"""CPU that aioquic, as lurcher tunes it, spends per MB of stream data, without sockets.

    PYTHONPATH=. python scripts/quic_memory_bench.py [--mtu 1200] [--requests 100]
        [--size 1048576]

Joins a client and a server connection in memory (``tests.support.quic_pair``), with the
given datagram size on both ends, and sends ``--requests`` streams of ``--size`` random
bytes, each answered with two bytes. Times with the process CPU clock, after five untimed
streams: building and encrypting the client's datagrams, and receiving, decrypting and
handling them on the server (the server's ACKs and replies are not timed). Prints both in
ms per MB. This is the per-packet Python cost that the UDP path adds nothing to; run it on an
idle machine, a few times (one run moves by a fifth on a shared 2-core VM).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from aioquic.quic.events import StreamDataReceived  # noqa: E402

from lurcher.core.quic import QuicSettings  # noqa: E402
from tests.support.quic_pair import CLIENT_ADDR, SERVER_ADDR, connected_pair  # noqa: E402


class Exchange:
    """One client and one server connection, and the CPU each side's timed steps took."""

    def __init__(self, mtu: int, size: int, workdir: Path) -> None:
        settings = QuicSettings(initial_mtu=mtu)
        self.client, self.server, _, _ = connected_pair(workdir, settings, settings)
        self.payload = os.urandom(size)
        self.now = 1.0
        self.build_s = self.receive_s = 0.0

    def one_stream(self) -> None:
        """Send the payload on a new stream until the server has all of it; answer it."""
        client, server = self.client, self.server
        stream_id = client.get_next_available_stream_id()
        client.send_stream_data(stream_id, self.payload, end_stream=True)
        received = 0
        while received < len(self.payload):
            started = time.process_time()
            datagrams = client.datagrams_to_send(self.now)
            self.build_s += time.process_time() - started
            started = time.process_time()
            for data, _ in datagrams:
                server.receive_datagram(bytes(data), CLIENT_ADDR, self.now)
            while (event := server.next_event()) is not None:
                if isinstance(event, StreamDataReceived):
                    received += len(event.data)
            self.receive_s += time.process_time() - started
            if received >= len(self.payload):
                server.send_stream_data(stream_id, b"ok", end_stream=True)
            self.now += 0.03
            for data, _ in server.datagrams_to_send(self.now):
                client.receive_datagram(bytes(data), SERVER_ADDR, self.now)
            while client.next_event() is not None:
                pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mtu", type=int, default=1200, help="datagram size, bytes")
    parser.add_argument("--requests", type=int, default=100, help="timed streams")
    parser.add_argument("--size", type=int, default=1 << 20, help="bytes per stream")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        exchange = Exchange(args.mtu, args.size, Path(workdir))
        for _ in range(5):
            exchange.one_stream()
        exchange.build_s = exchange.receive_s = 0.0
        for _ in range(args.requests):
            exchange.one_stream()
    megabytes = args.requests * args.size / (1 << 20)
    print(f"{args.mtu}-byte datagrams, {args.requests} x {args.size} B: "
          f"build+encrypt {exchange.build_s / megabytes * 1e3:.2f} ms/MB, "
          f"receive+decrypt {exchange.receive_s / megabytes * 1e3:.2f} ms/MB")


if __name__ == "__main__":
    main()
