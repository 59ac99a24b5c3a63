"""Probe for README, Performance, "Polls of history off the event loop": one client reads
back 1 GB of history (1 MiB polls; the page-cache window evicted all but its newest part)
while a second connection sends one message every 0.5 ms; prints the read-back time and
the second connection's send latencies. Each run starts its own server (its data in a
temporary directory) and stops it.

    PYTHONPATH=<checkout> .venv/bin/python scripts/history_reads_probe.py [rounds]
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time

from lurcher.core.wire.batch import MessageBatch
from lurcher.sdk.client import Client

BATCHES, PER_BATCH, SIZE = 1000, 1000, 1000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(data_dir: str, port: int) -> subprocess.Popen:
    env = {**os.environ, "LURCHER_SYSTEM_PATH": data_dir,
           "LURCHER_TCP_ADDRESS": f"127.0.0.1:{port}", "LURCHER_QUIC_ENABLED": "false",
           "LURCHER_HTTP_ENABLED": "false", "LURCHER_WEBSOCKET_ENABLED": "false"}
    server = subprocess.Popen([sys.executable, "-m", "lurcher.server",
                               "--with-default-root-credentials"], env=env, cwd=data_dir,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise SystemExit("the server did not start")


async def measure(address: str) -> str:
    reader = Client(address, username="iggy", password="iggy", heartbeat_interval_s=None)
    other = Client(address, username="iggy", password="iggy", heartbeat_interval_s=None)
    await reader.connect()
    await other.connect()
    for stream in ("history", "other"):
        await reader.create_stream(stream)
        await reader.create_topic(stream, "t", 1)
    batch = MessageBatch.build([os.urandom(SIZE) for _ in range(PER_BATCH)])
    for _ in range(BATCHES):
        await reader.send_messages("history", "t", batch, 0)
    await asyncio.sleep(3)  # the drop-behind thread evicts what is past the window
    one, latencies, reading = MessageBatch.build([b"x" * 100]), [], True

    async def send_meanwhile() -> None:
        while reading:
            start = time.perf_counter()
            await other.send_messages("other", "t", one, 0)
            latencies.append(time.perf_counter() - start)
            await asyncio.sleep(0.0005)

    sender = asyncio.create_task(send_meanwhile())
    offset, start = 0, time.perf_counter()
    while offset < BATCHES * PER_BATCH:
        polled = await reader.poll_messages("history", "t", 0, offset, PER_BATCH, consumer=1)
        offset += polled.messages_count
    took = time.perf_counter() - start
    reading = False
    await sender
    await reader.close()
    await other.close()
    ms = sorted(x * 1e3 for x in latencies)
    return (f"history read back in {took * 1e3:.0f} ms; the other connection's sends: "
            f"{len(ms)}, p50 {ms[len(ms) // 2]:.2f} p99 {ms[int(len(ms) * 0.99)]:.2f} "
            f"max {ms[-1]:.2f} ms, {sum(x > 2 for x in ms)} over 2 ms")


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    for _ in range(rounds):
        with tempfile.TemporaryDirectory(prefix="history-probe-") as data_dir:
            port = free_port()
            server = start_server(data_dir, port)
            try:
                print(asyncio.run(measure(f"127.0.0.1:{port}")), flush=True)
            finally:
                server.terminate()
                server.wait(30)


if __name__ == "__main__":
    main()
