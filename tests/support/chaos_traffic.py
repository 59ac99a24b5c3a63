"""The traffic of a chaos test: producers and consumers that keep going through faults, with
the official ``apache-iggy`` 0.8.0 client or our SDK, and the record of what they did.

A ``Side`` is one client library behind three calls (connect to an address, send a batch to
a partition, poll a partition from an offset); every call is bounded by ``CALL_TIMEOUT_S``.
A failed or timed-out call drops the connection; the next call connects to the next node
(round robin), so a client never needs to know which node is faulty.

``Producer`` sends batches of ``BATCH`` messages to the partitions in turn. Message ``seq``
of producer ``tag`` carries the payload ``b"<tag>:<seq>"`` (padded); our SDK also gives it
the id ``tag << 64 | seq``. A batch is resent, same payloads and same ids, until it is
acknowledged; only then does the producer go on, so acknowledged batches of one producer
are ordered per partition. The official 0.8.0 client cannot set ids (its ``SendMessage``
takes a payload only and the server assigns the id), and it resends a request by itself
once after reconnecting when its connection dropped (0.8's ``TcpClient``), so its batches
may be stored more than once, unseen by this record: deduplication cannot drop those copies.

``Consumer`` polls every partition from the offset after the last message it received and
records every message it got by (partition, offset).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from apache_iggy import IggyClient, PollingStrategy, SendMessage

from lurcher.sdk import Client

CALL_TIMEOUT_S = 3.0
BATCH = 10
PAYLOAD_BYTES = 48
SEND_GAP_S = 0.01  # between acknowledged batches, so the producers do not starve the nodes
POLL_COUNT = 200
STREAM, TOPIC = "chaos", "events"

Polled = tuple[int, int, bytes]  # offset, id, payload


def payload(tag: int, seq: int) -> bytes:
    return f"{tag}:{seq}:".encode().ljust(PAYLOAD_BYTES, b".")


def parse_payload(data: bytes) -> tuple[int, int] | None:
    """(tag, seq) of a payload built by ``payload``; None for anything else."""
    parts = data.split(b":")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def message_id(tag: int, seq: int) -> int:
    return tag << 64 | seq


class Side:
    """One client library; subclasses implement ``_connect``, ``_send`` and ``_poll``."""

    name = "?"
    sets_ids = False

    def __init__(self, addresses: list[str]) -> None:
        self.addresses = addresses
        self.turn = 0
        self.client: Any = None
        self.reconnects = 0

    async def call(self, what: str, *args: Any) -> Any:
        """``what`` on the current connection (made first if needed). Raises on failure or
        timeout, after dropping the connection."""
        try:
            if self.client is None:
                address = self.addresses[self.turn % len(self.addresses)]
                self.turn += 1
                self.reconnects += 1
                self.client = await asyncio.wait_for(self._connect(address), CALL_TIMEOUT_S)
            return await asyncio.wait_for(getattr(self, what)(*args), CALL_TIMEOUT_S)
        except BaseException:
            await self.drop()
            raise

    async def drop(self) -> None:
        self.client = None


class SdkSide(Side):
    name, sets_ids = "sdk", True

    async def _connect(self, address: str) -> Client:
        client = Client.from_connection_string(f"iggy://iggy:iggy@{address}",
                                               heartbeat_interval_s=None,
                                               reconnection_enabled=False)
        await client.connect()
        return client

    async def _send(self, partition: int, tag: int, seqs: range) -> None:
        await self.client.send_messages(STREAM, TOPIC, [payload(tag, s) for s in seqs],
                                        partition, ids=[message_id(tag, s) for s in seqs])

    async def _poll(self, partition: int, offset: int) -> list[Polled]:
        polled = await self.client.poll_messages(STREAM, TOPIC, partition, offset, POLL_COUNT)
        return [(m.offset, m.id, bytes(m.payload)) for m in polled.messages()]

    async def drop(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            try:
                await asyncio.wait_for(client.close(), 1)
            except BaseException:  # noqa: BLE001 - the connection is gone either way
                pass


class OfficialSide(Side):
    """apache-iggy 0.8.0: it logs in and follows the leader by itself; it has no close()."""

    name = "official"

    async def _connect(self, address: str) -> IggyClient:
        client = IggyClient.from_connection_string(f"iggy://iggy:iggy@{address}")
        await client.connect()
        return client

    async def _send(self, partition: int, tag: int, seqs: range) -> None:
        await self.client.send_messages(STREAM, TOPIC, partition,
                                        [SendMessage(payload(tag, s)) for s in seqs])

    async def _poll(self, partition: int, offset: int) -> list[Polled]:
        got = await self.client.poll_messages(STREAM, TOPIC, partition,
                                              PollingStrategy.Offset(offset), POLL_COUNT, False)
        return [(m.offset(), m.id(), m.payload()) for m in got]


@dataclass
class ProducerRecord:
    tag: int
    sets_ids: bool
    acked: dict[int, list[int]] = field(default_factory=dict)  # partition -> acked seqs
    sent: dict[int, int] = field(default_factory=dict)  # seq -> partition, every seq tried
    batch: int = BATCH  # messages per batch: batch k holds seqs k*batch .. k*batch+batch-1
    unacked: list[int] = field(default_factory=list)  # seqs given up on at the end


class Producer:
    def __init__(self, side: Side, tag: int, partitions: int) -> None:
        self.side, self.partitions = side, partitions
        self.record = ProducerRecord(tag, side.sets_ids)

    async def run(self, stop: asyncio.Event, drain_s: float) -> None:
        """Send until ``stop``; the batch under way then gets ``drain_s`` more to be acked."""
        seq, batch = 0, 0
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            partition = batch % self.partitions
            seqs = range(seq, seq + BATCH)
            if await self._until_acked(partition, seqs, stop, loop, drain_s):
                self.record.acked.setdefault(partition, []).extend(seqs)
            else:
                self.record.unacked.extend(seqs)
            seq, batch = seq + BATCH, batch + 1
            await asyncio.sleep(SEND_GAP_S)

    async def _until_acked(self, partition: int, seqs: range, stop: asyncio.Event,
                           loop: asyncio.AbstractEventLoop, drain_s: float) -> bool:
        deadline = None
        for s in seqs:
            self.record.sent[s] = partition
        while True:
            try:
                await self.side.call("_send", partition, self.record.tag, seqs)
                return True
            except Exception:  # noqa: BLE001 - any failure: resend the same batch
                pass
            if stop.is_set():
                deadline = deadline or loop.time() + drain_s
                if loop.time() > deadline:
                    return False
            await asyncio.sleep(0.05)


@dataclass
class ConsumerRecord:
    name: str
    received: dict[int, dict[int, tuple[int, bytes]]] = field(default_factory=dict)
    count: int = 0


class Consumer:
    def __init__(self, side: Side, partitions: int) -> None:
        self.side, self.partitions = side, partitions
        self.record = ConsumerRecord(side.name)
        self.next = [0] * partitions

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            got_any = False
            for partition in range(self.partitions):
                try:
                    polled = await self.side.call("_poll", partition, self.next[partition])
                except Exception:  # noqa: BLE001 - reconnect on the next call
                    await asyncio.sleep(0.05)
                    continue
                seen = self.record.received.setdefault(partition, {})
                for offset, mid, data in polled:
                    seen[offset] = (mid, data)
                    self.record.count += 1
                    self.next[partition] = max(self.next[partition], offset + 1)
                got_any = got_any or bool(polled)
            if not got_any:
                await asyncio.sleep(0.05)
