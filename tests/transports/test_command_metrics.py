"""Command metrics come from a dispatcher observer the server registers at start, so every
front end's commands are counted: with HTTP off (an in-process server with TCP only, read
from its registry) and, with HTTP on, commands sent over TCP only are visible at /metrics."""

from __future__ import annotations

import asyncio
import re
import struct
import time
from pathlib import Path

import httpx

from lurcher.runtime.config import load_config
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.frames import encode_request
from lurcher.server import close_listeners, open_shard, start_listeners
from lurcher.transports.http.metrics import registered_metrics
from tests.support.server import LurcherServer
from tests.transports.conftest import make_client

RESPONSE = struct.Struct("<II")
PING = encode_request(1, b"")
GET_STATS = encode_request(10, b"")  # unauthenticated: answered with an error status


def counter(text: str, command: str, outcome: str) -> float:
    pattern = (rf'^lurcher_commands_total\{{command="{command}",outcome="{outcome}"\}} '
               r"(\S+)$")
    match = re.search(pattern, text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


async def exchange(address: str, frames: list[bytes]) -> list[int]:
    host, port = address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    statuses = []
    try:
        for frame in frames:
            writer.write(frame)
            status, length = RESPONSE.unpack(await reader.readexactly(RESPONSE.size))
            await reader.readexactly(length)
            statuses.append(status)
    finally:
        writer.close()
    return statuses


async def test_tcp_commands_are_counted_with_http_off(tmp_path: Path) -> None:
    config = load_config(environ={
        "LURCHER_SYSTEM_PATH": str(tmp_path), "LURCHER_TCP_ADDRESS": "127.0.0.1:0",
        "LURCHER_HTTP_ENABLED": "false", "LURCHER_QUIC_ENABLED": "false",
        "LURCHER_WEBSOCKET_ENABLED": "false", "LURCHER_ROOT_USERNAME": "iggy",
        "LURCHER_ROOT_PASSWORD": "iggy"})
    shard = open_shard(config, True, 0, 1)
    listeners = await start_listeners(shard, config)
    try:
        assert set(shard.endpoints) == {"tcp"}
        statuses = await exchange(shard.endpoints["tcp"], [PING, PING, GET_STATS])
        assert statuses[:2] == [0, 0] and statuses[2] != 0
        metrics = registered_metrics(shard)
        assert metrics is not None
        text = metrics.render().decode()
        assert counter(text, "ping", "ok") == 2
        assert counter(text, "get_stats", "unauthenticated") == 1
        assert 'lurcher_command_duration_seconds_count{command="ping"} 2.0' in text
    finally:
        for listener in listeners:
            listener.close()
        await close_listeners(listeners)
        shard.close()


async def test_tcp_commands_show_at_the_http_metrics_endpoint(
        plain_server: LurcherServer) -> None:
    url = f"http://{plain_server.endpoints['http']}/metrics"
    async with httpx.AsyncClient() as http:
        before = counter((await http.get(url)).text, "get_cluster_metadata", "ok")
        client = make_client(plain_server, "tcp", username="iggy", password="iggy")
        await client.connect()
        try:
            for _ in range(3):
                await client.get_cluster_metadata()
        finally:
            await client.close()
        after = counter((await http.get(url)).text, "get_cluster_metadata", "ok")
    assert after - before == 3


def test_codes_outside_the_table_share_one_series() -> None:
    from lurcher.transports.http.metrics import Metrics

    class NoPartitions:
        partitions: dict = {}

    metrics = Metrics(NoPartitions())
    for code in (9999, 12345, 4_000_000_000):
        metrics.on_command(code, 3, 0.001)
    metrics.on_command(1, 0, 0.001)
    text = metrics.render().decode()
    assert counter(text, "unknown", "invalid_command") == 3
    assert counter(text, "ping", "ok") == 1
    assert "9999" not in text and len(metrics.tallies) == 2


def test_the_scrape_shows_tallied_counts_buckets_and_sums() -> None:
    from lurcher.transports.http.metrics import Metrics

    class NoPartitions:
        partitions: dict = {}

    metrics = Metrics(NoPartitions())
    for seconds in (0.0003, 0.001, 0.02):
        metrics.on_command(1, 0, seconds)
    metrics.on_command(101, ErrorCode.STREAM_ID_NOT_FOUND, 0.002)
    metrics.on_command(101, 0, 0.004)
    text = metrics.render().decode()
    assert counter(text, "ping", "ok") == 3
    assert counter(text, "send_messages", "ok") == 1
    assert counter(text, "send_messages", "stream_id_not_found") == 1
    bucket = 'lurcher_command_duration_seconds_bucket{command="%s",le="%s"} %s'
    assert bucket % ("ping", "0.00025", "0.0") in text
    assert bucket % ("ping", "0.001", "2.0") in text  # a bound is inclusive, as Prometheus's
    assert bucket % ("ping", "+Inf", "3.0") in text
    assert bucket % ("send_messages", "0.0025", "1.0") in text  # every outcome of a command
    assert 'lurcher_command_duration_seconds_count{command="send_messages"} 2.0' in text
    assert re.search(r'lurcher_command_duration_seconds_sum\{command="ping"\} 0\.0213', text)


class SlowPartitions:
    """Stands in for a shard's partitions whose series take ``cost_s`` of a fake clock to
    collect (a rendering's cost grows with the partitions: 0.1 s for 5,000 of them); the
    fake clock is both the time that passes and the loop's work."""

    def __init__(self, cost_s: float) -> None:
        self.now, self.cost_s, self.collected = 100.0, cost_s, 0

    def clock(self) -> float:
        return self.now

    def items(self):
        self.collected += 1
        self.now += self.cost_s
        return []


def test_an_expensive_scrape_is_reused_for_ten_times_its_cost() -> None:
    """The endpoint needs no login: scraped in a loop, rendering must not take the shard's
    event loop (each scrape rendered again on the old code)."""
    from lurcher.transports.http.metrics import Metrics

    partitions = SlowPartitions(cost_s=0.1)
    shard = type("Shard", (), {"partitions": partitions})()
    metrics = Metrics(shard, clock=partitions.clock, work_clock=partitions.clock)
    first = metrics.render()
    for _ in range(50):
        partitions.now += 0.015  # 50 scrapes within the next 0.75 s ...
        assert metrics.render() is first
    assert partitions.collected == 1  # ... share the one rendering
    partitions.now += 0.3  # past 10 x 0.1 s from its start
    metrics.on_command(1, 0, 0.001)
    assert counter(metrics.render().decode(), "ping", "ok") == 1
    assert partitions.collected == 2


def test_a_cheap_scrape_is_never_reused() -> None:
    """A server with few partitions: a scrape right after a command counts it."""
    from lurcher.transports.http.metrics import Metrics

    partitions = SlowPartitions(cost_s=0.001)
    shard = type("Shard", (), {"partitions": partitions})()
    metrics = Metrics(shard, clock=partitions.clock, work_clock=partitions.clock)
    metrics.render()
    metrics.on_command(1, 0, 0.001)
    assert counter(metrics.render().decode(), "ping", "ok") == 1
    assert partitions.collected == 2


class PreemptedPartitions:
    """A shard's few partitions, collected while the process is preempted for ``pause_s``
    (a busy machine): time passes, the event loop does no work."""

    def __init__(self, pause_s: float) -> None:
        self.pause_s = pause_s

    def items(self):
        time.sleep(self.pause_s)
        return []


def test_a_cheap_scrape_preempted_mid_rendering_is_not_reused() -> None:
    """A rendering's cost is what it took of the loop, not the time that passed: a process
    preempted for 50 ms while rendering cost the loop nothing, and was reused for 0.5 s on
    the old code (a scrape right after a command did not count it, on a loaded machine)."""
    from lurcher.transports.http.metrics import Metrics

    shard = type("Shard", (), {"partitions": PreemptedPartitions(pause_s=0.05)})()
    metrics = Metrics(shard)
    metrics.render()
    metrics.on_command(1, 0, 0.001)
    assert counter(metrics.render().decode(), "ping", "ok") == 1
