"""The chaos test's own parts, checked without a cluster: the TCP relay cuts and heals a link,
the fault plan is a function of its seed, and each check of ``chaos_checks`` reports the
violation planted for it (and nothing on a clean log), so a green chaos run means what it
says.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support.chaos import KINDS, plan_faults
from tests.support.chaos_checks import Findings, check_consumers, check_disk, check_producers
from tests.support.chaos_traffic import (
    ConsumerRecord,
    ProducerRecord,
    message_id,
    payload,
)
from tests.support.tcp_relay import TcpRelay


async def echo_server() -> asyncio.base_events.Server:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()
    return await asyncio.start_server(echo, "127.0.0.1", 0)


async def round_trip(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    got = await asyncio.wait_for(reader.readexactly(len(data)), 5)
    writer.close()
    return got


async def test_the_relay_forwards_and_a_cut_resets_then_refuses_until_healed():
    server = await echo_server()
    relay = await TcpRelay(server.sockets[0].getsockname()[:2]).start()
    try:
        big = bytes(range(256)) * 8192  # 2 MiB: flow control in both directions
        assert await round_trip(relay.port, big) == big
        reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
        writer.write(b"x")
        assert await reader.readexactly(1) == b"x"
        relay.cut()
        assert await asyncio.wait_for(reader.read(1), 5) == b""  # the open link is reset
        with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
            await round_trip(relay.port, b"refused")
        relay.heal()
        assert await round_trip(relay.port, b"again") == b"again"
    finally:
        await relay.close()
        server.close()


def test_the_fault_plan_is_a_function_of_the_seed():
    plan = plan_faults(1234, 20)
    assert plan == plan_faults(1234, 20) and plan != plan_faults(1235, 20)
    assert {f.kind for f in plan_faults(1, 200)} == set(KINDS)
    assert {f.node for f in plan_faults(1, 200)} == {0, 1, 2}


def sdk_producer(acked: list[int]) -> ProducerRecord:
    return ProducerRecord(1, True, {0: acked}, {s: 0 for s in range(10)}, batch=1)


def official_producer(acked: list[int]) -> ProducerRecord:
    """Batches of two: seqs 0 and 1, 2 and 3, ..."""
    return ProducerRecord(2, False, {0: acked}, {s: 0 for s in range(10)}, batch=2)


def log_of(*messages: tuple[int, int]) -> dict[int, list]:
    """A one-partition log of (tag, seq) messages, ids as the producers give them."""
    return {0: [(offset, message_id(tag, seq) if tag == 1 else 99, payload(tag, seq))
                for offset, (tag, seq) in enumerate(messages)]}


def findings_of(log: dict, producers: list[ProducerRecord]) -> set[str]:
    findings = Findings()
    check_producers("node", log, producers, findings)
    return {check for check, _ in findings.counts}


def test_a_clean_log_has_no_finding():
    log = log_of((1, 0), (2, 0), (1, 1), (2, 1), (2, 0), (2, 1), (1, 2), (2, 2), (2, 3))
    producers = [sdk_producer([0, 1, 2]), official_producer([0, 1, 2, 3])]
    assert findings_of(log, producers) == set()


@pytest.mark.parametrize("log, expected", [
    (log_of((1, 0), (1, 2)), "producer 1: an acknowledged message is missing"),
    (log_of((1, 0), (1, 1), (1, 1), (1, 2)), "producer 1: a message present more than once"),
    (log_of((1, 0), (1, 2), (1, 1)), "producer 1: messages out of the order sent"),
    (log_of((1, 0), (1, 1), (1, 2), (1, 42)), "a message no producer sent to this partition"),
])
def test_each_planted_violation_is_reported(log: dict, expected: str):
    assert expected in findings_of(log, [sdk_producer([0, 1, 2])])


def test_official_batches_may_repeat_only_whole():
    producers = [official_producer([0, 1])]
    assert findings_of(log_of((2, 0), (2, 1), (2, 0), (2, 1)), producers) == set()
    assert findings_of(log_of((2, 0), (2, 1), (2, 1)), producers) == {
        "producer 2: a message present more than once"}


def test_a_received_message_that_changed_or_vanished_is_reported():
    log = log_of((1, 0), (1, 1))
    consumer = ConsumerRecord("sdk", {0: {o: (i, p) for o, i, p in log[0]}})
    findings = Findings()
    check_consumers("node", log, [consumer], findings)
    assert not findings
    check_consumers("node", log_of((1, 0)), [consumer], findings)
    check_consumers("node", log_of((1, 1), (1, 0)), [consumer], findings)
    assert findings.counts[("consumer sdk: a received message disappeared",
                            "node partition 0")] == 3


def test_replicas_that_differ_by_one_byte_or_one_file_are_reported(tmp_path: Path):
    roots = {}
    for name, (log, extra) in {"a": (b"abc", False), "b": (b"abc", False),
                               "c": (b"abd", False), "d": (b"abc", True)}.items():
        part = tmp_path / name / "0" / "topics" / "0" / "partitions" / "0"
        part.mkdir(parents=True)
        (part / "00000000000000000000.log").write_bytes(log)
        (part / "00000000000000000000.index").write_bytes(b"i")
        if extra:
            (part / "00000000000000000003.log").write_bytes(b"")
        roots[name] = tmp_path / name
    findings = Findings()
    check_disk(roots, findings)
    assert set(findings.counts) == {("replicas differ on disk", "a vs c"),
                                    ("replicas differ on disk", "a vs d")}
