"""The UDP transport with segmentation offload (``lurcher.core.udp_offload``), on real
loopback sockets: runs of same-size datagrams leave in one call each, arrive whole and in
order (coalesced reads split again), a full send buffer queues the rest in order, and a
socket that cannot offload still delivers everything."""

from __future__ import annotations

import asyncio
import os
import socket

import pytest

from lurcher.core import udp_offload
from lurcher.core.udp_offload import (OffloadDatagramTransport, offload_runs, open_endpoint,
                                      split_segments)


def test_runs_hold_same_size_datagrams_and_end_at_a_shorter_one() -> None:
    a, b, c = b"a" * 1200, b"b" * 1200, b"c" * 700
    d = b"d" * 1300
    assert list(offload_runs([a, b, c, a, d, a])) == [[a, b, c], [a], [d, a]]


def test_runs_respect_the_segment_count_and_byte_caps() -> None:
    small = [bytes([i % 256]) * 100 for i in range(150)]
    runs = list(offload_runs(small))
    assert [len(r) for r in runs] == [64, 64, 22]
    big = [b"x" * 30_000] * 5
    assert [len(r) for r in offload_runs(big)] == [2, 2, 1]  # 3 x 30,000 > 65,000
    assert [d for r in runs for d in r] == small


def test_a_coalesced_read_splits_into_its_datagrams() -> None:
    data = b"a" * 1200 + b"b" * 1200 + b"c" * 10
    assert list(split_segments(data, 1200)) == [b"a" * 1200, b"b" * 1200, b"c" * 10]
    assert list(split_segments(data, 0)) == [data]


class Collector(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.datagrams: list[bytes] = []
        self.errors: list[Exception] = []
        self.lost = asyncio.get_running_loop().create_future()

    def datagram_received(self, data: bytes, addr) -> None:
        self.datagrams.append(data)

    def error_received(self, exc: Exception) -> None:
        self.errors.append(exc)

    def connection_lost(self, exc) -> None:
        if not self.lost.done():
            self.lost.set_result(exc)


def _socket(send_buffer: int | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if send_buffer:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * 1024 * 1024)
    sock.bind(("127.0.0.1", 0))
    return sock


async def _endpoints(receiver_factory: type = Collector, send_buffer: int | None = None
                     ) -> tuple[OffloadDatagramTransport, Collector, OffloadDatagramTransport]:
    """A receiving endpoint (its transport and protocol) and a sending transport."""
    receiver_t, receiver = await open_endpoint(receiver_factory, _socket())
    sender_t, _ = await open_endpoint(Collector, _socket(send_buffer))
    return receiver_t, receiver, sender_t


async def _until_received(receiver: Collector, count: int, tries: int = 400) -> None:
    """Wait (bounded) until ``receiver`` holds ``count`` datagrams."""
    for _ in range(tries):
        if len(receiver.datagrams) >= count:
            return
        await asyncio.sleep(0.005)


async def _exchange(datagrams: list[bytes], *, send_buffer: int | None = None,
                    offload: bool = True) -> tuple[list[bytes], OffloadDatagramTransport]:
    receiver_t, receiver, sender_t = await _endpoints(send_buffer=send_buffer)
    sender_t._send_offload = offload
    calls = []
    real_sendmsg = sender_t._sendmsg
    sender_t._sendmsg = lambda run, control, addr: (calls.append(len(run)),
                                                    real_sendmsg(run, control, addr))
    sender_t.send_datagrams(datagrams, receiver_t.get_extra_info("sockname"))
    await _until_received(receiver, len(datagrams))
    sender_t.close()
    receiver_t.close()
    await asyncio.gather(sender_t.get_protocol().lost, receiver.lost)
    sender_t.calls = calls  # type: ignore[attr-defined]
    return receiver.datagrams, sender_t


def test_a_megabyte_of_small_datagrams_leaves_in_few_calls_and_arrives_in_order() -> None:
    datagrams = [os.urandom(1200) for _ in range(870)] + [os.urandom(333)]
    received, sender = asyncio.run(_exchange(datagrams))
    assert received == datagrams
    assert len(sender.calls) <= 20  # 871 datagrams, at most 54 (65,000 B) per call
    assert sum(sender.calls) == len(datagrams)


def test_a_full_send_buffer_queues_the_rest_in_order(monkeypatch) -> None:
    """The third offloaded send would block (loopback rarely fills a UDP send buffer, so
    the kernel's "would block" is injected): it and everything after it are queued, sent
    once the socket is writable, and arrive complete and in order."""
    real = OffloadDatagramTransport._sendmsg
    calls = []

    def full_at_the_third(self, run, control, addr):
        calls.append(len(run))
        if len(calls) == 3:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        real(self, run, control, addr)
    monkeypatch.setattr(OffloadDatagramTransport, "_sendmsg", full_at_the_third)
    datagrams = [i.to_bytes(4, "big") * 300 for i in range(500)]  # 1,200 B each

    async def run() -> tuple[list[bytes], int]:
        receiver_t, receiver, sender_t = await _endpoints()
        sender_t.send_datagrams(datagrams, receiver_t.get_extra_info("sockname"))
        queued = sender_t.get_write_buffer_size()
        sender_t.send_datagrams([b"late" * 300], receiver_t.get_extra_info("sockname"))
        await _until_received(receiver, len(datagrams) + 1, 200)
        assert sender_t.get_write_buffer_size() == 0
        sender_t.close()
        receiver_t.close()
        return receiver.datagrams, queued

    received, queued = asyncio.run(run())
    assert queued == (500 - 2 * 54) * 1200  # two runs of 54 went out before the block
    assert received == datagrams + [b"late" * 300]
    assert len(calls) == 3  # the queue drains with plain sends


def test_without_offload_every_datagram_still_arrives_in_order() -> None:
    datagrams = [os.urandom(1200) for _ in range(200)]
    received, sender = asyncio.run(_exchange(datagrams, offload=False))
    assert received == datagrams
    assert sender.calls == []  # one plain send per datagram


def test_a_refused_offload_falls_back_for_the_socket_and_loses_nothing(monkeypatch) -> None:
    def refuse(self, run, control, addr):
        raise OSError(5, "Input/output error")  # what a device without checksum offload says
    monkeypatch.setattr(OffloadDatagramTransport, "_sendmsg", refuse)

    async def run() -> tuple[list[bytes], bool]:
        receiver_t, receiver, sender_t = await _endpoints()
        datagrams = [os.urandom(1200) for _ in range(100)]
        sender_t.send_datagrams(datagrams, receiver_t.get_extra_info("sockname"))
        await _until_received(receiver, len(datagrams), 200)
        offload = sender_t._send_offload
        sender_t.close()
        receiver_t.close()
        return receiver.datagrams == datagrams, offload

    delivered, offload = asyncio.run(run())
    assert delivered and offload is False


def test_a_closed_port_reaches_error_received_on_a_connected_socket() -> None:
    async def run() -> list[Exception]:
        closed = _socket()
        port = closed.getsockname()[1]
        closed.close()
        sock = _socket()
        sock.connect(("127.0.0.1", port))
        transport, protocol = await open_endpoint(Collector, sock)
        transport.send_datagrams([b"x" * 100], None)
        for _ in range(100):
            if protocol.errors:
                break
            await asyncio.sleep(0.005)
        transport.close()
        return protocol.errors

    errors = asyncio.run(run())
    assert errors and isinstance(errors[0], ConnectionRefusedError)


@pytest.mark.parametrize("size", [udp_offload.OFFLOAD_BYTES // 2 + 1, 64_000])
def test_large_datagrams_go_one_per_call(size: int) -> None:
    datagrams = [os.urandom(size) for _ in range(4)]
    received, sender = asyncio.run(_exchange(datagrams))
    assert received == datagrams
    assert sender.calls == []


def test_a_full_buffer_after_a_refused_offload_sends_no_datagram_twice(monkeypatch) -> None:
    """The offload is refused and the fallback's fifth plain send would block: the four
    already sent are not queued again, and everything arrives once, in order."""
    def refuse(self, run, control, addr):
        raise OSError(5, "Input/output error")
    real_one = OffloadDatagramTransport._send_one
    plain = []

    def full_at_the_fifth(self, data, addr):
        plain.append(data)
        if len(plain) == 5:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        real_one(self, data, addr)
    monkeypatch.setattr(OffloadDatagramTransport, "_sendmsg", refuse)
    monkeypatch.setattr(OffloadDatagramTransport, "_send_one", full_at_the_fifth)
    datagrams = [i.to_bytes(4, "big") * 300 for i in range(100)]

    async def run() -> list[bytes]:
        receiver_t, receiver, sender_t = await _endpoints()
        sender_t.send_datagrams(datagrams, receiver_t.get_extra_info("sockname"))
        await _until_received(receiver, len(datagrams), 200)
        await asyncio.sleep(0.05)  # a duplicate would arrive after the last one
        sender_t.close()
        receiver_t.close()
        return receiver.datagrams

    assert asyncio.run(run()) == datagrams


def test_the_backlog_is_bounded_and_drops_what_does_not_fit(monkeypatch) -> None:
    """A send buffer that stays full: the queue stops at BACKLOG_BYTES, the datagrams past
    it are dropped and counted, and once the socket drains what was kept arrives in order."""
    from lurcher.core.udp_offload import BACKLOG_BYTES
    blocked = [True]
    real_one = OffloadDatagramTransport._send_one

    def would_block(self, *args):
        raise BlockingIOError(11, "Resource temporarily unavailable")

    def while_blocked(self, data, addr):
        if blocked[0]:
            would_block(self)
        real_one(self, data, addr)
    monkeypatch.setattr(OffloadDatagramTransport, "_sendmsg", would_block)
    monkeypatch.setattr(OffloadDatagramTransport, "_send_one", while_blocked)
    datagrams = [i.to_bytes(4, "big") * 300 for i in range(6000)]  # 7.2 MB
    kept = BACKLOG_BYTES // 1200

    async def run() -> tuple[int, int, list[bytes]]:
        receiver_t, receiver, sender_t = await _endpoints()
        address = receiver_t.get_extra_info("sockname")
        for start in range(0, len(datagrams), 500):
            sender_t.send_datagrams(datagrams[start:start + 500], address)
        queued, dropped = sender_t.get_write_buffer_size(), sender_t.dropped
        blocked[0] = False
        await _until_received(receiver, kept)
        sender_t.close()
        receiver_t.close()
        return queued, dropped, receiver.datagrams

    queued, dropped, received = asyncio.run(run())
    assert queued == kept * 1200 <= BACKLOG_BYTES
    assert dropped == len(datagrams) - kept
    assert received == datagrams[:kept]


def test_a_failing_protocol_factory_closes_the_socket() -> None:
    sock = _socket()

    def broken_factory():
        raise ValueError("bad configuration")

    async def run() -> None:
        with pytest.raises(ValueError):
            await open_endpoint(broken_factory, sock)

    asyncio.run(run())
    assert sock.fileno() == -1


class BatchCollector(Collector):
    """A protocol that takes datagrams read together in one call."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def datagrams_received(self, datagrams: list[bytes], addr) -> None:
        self.batches.append(len(datagrams))
        self.datagrams.extend(datagrams)


def test_a_protocol_with_datagrams_received_gets_each_coalesced_read_at_once() -> None:
    datagrams = [i.to_bytes(4, "big") * 300 for i in range(870)]

    async def run() -> tuple[list[bytes], list[int], bool]:
        receiver_t, receiver, sender_t = await _endpoints(BatchCollector)
        sender_t.send_datagrams(datagrams, receiver_t.get_extra_info("sockname"))
        await _until_received(receiver, len(datagrams))
        coalescing = receiver_t._receive_offload
        sender_t.close()
        receiver_t.close()
        return receiver.datagrams, receiver.batches, coalescing

    received, batches, coalescing = asyncio.run(run())
    assert received == datagrams  # each once, in order
    assert coalescing and max(batches) > 1


def test_a_datagram_read_alone_reaches_datagrams_received_as_a_run_of_one() -> None:
    """A protocol with ``datagrams_received`` gets every read through it, a lone datagram
    too (``RoutingQuicServer`` routes runs by connection ID; aioquic's per-datagram path
    parses the whole header)."""
    async def run() -> tuple[list[bytes], list[int]]:
        receiver_t, receiver, sender_t = await _endpoints(BatchCollector)
        sender_t.sendto(b"alone" * 100, receiver_t.get_extra_info("sockname"))
        await _until_received(receiver, 1)
        sender_t.close()
        receiver_t.close()
        return receiver.datagrams, receiver.batches

    received, batches = asyncio.run(run())
    assert received == [b"alone" * 100] and batches == [1]
