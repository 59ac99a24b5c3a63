"""The RabbitMQ Streams driver: rstream (the stream protocol, not AMQP).

One RabbitMQ stream per (stream, partition): ``bench-stream-S-pP``. ``send`` publishes the
batch with ``send_batch`` (one publish frame) and waits until the broker confirmed every
message of it. Consumers subscribe (push, credit-based) from the first offset and ``poll``
returns what arrived since the last poll, waiting briefly when nothing did; payloads go
through an identity decoder (no AMQP decoding). RabbitMQ 3.10 streams have no competing
consumers, so a group's members split the partitions statically (member k of n takes the
partitions p with p % n == k), each message still going to one member.
"""

from __future__ import annotations

import asyncio

from rstream import ConfirmationStatus, Consumer, ConsumerOffsetSpecification, OffsetType, Producer

from lurcher.bench.drivers import Driver
from lurcher.bench.options import BenchOptions
from lurcher.bench.workloads import Layout, layout, stream_name, stream_of

USER = PASSWORD = "guest"
FRAME_MAX = 16 << 20
POLL_WAIT_S = 0.05


def rmq_stream(stream: int, partition: int) -> str:
    return f"{stream_name(stream)}-p{partition}"


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def producer(address: str) -> Producer:
    host, port = _host_port(address)
    return Producer(host, port, username=USER, password=PASSWORD, frame_max=FRAME_MAX)


async def prepare(address: str, options: BenchOptions, layout_: Layout) -> None:
    """Delete and create one stream per (stream, partition)."""
    async with producer(address) as p:
        for s in range(1, layout_.streams + 1):
            for part in range(layout_.partitions):
                name = rmq_stream(s, part)
                await p.delete_stream(name, missing_ok=True)
                await p.create_stream(name)


def member_partitions(options: BenchOptions, actor_id: int, stream: int,
                      partitions: int) -> list[int]:
    """The partitions group member ``actor_id`` of ``stream``'s group reads."""
    streams = layout(options).streams
    members = [i for i in range(1, options.consumers + 1) if stream_of(i, streams) == stream]
    k, n = members.index(actor_id), len(members)
    return [p for p in range(partitions) if p % n == k]


class RabbitMqDriver(Driver):
    async def open(self) -> None:
        spec = self.spec
        self.streams = [rmq_stream(spec.stream, p) for p in range(spec.partitions)]
        self.producer = producer(self.address)
        await self.producer.start()
        host, port = _host_port(self.address)
        self.consumer = Consumer(host, port, username=USER, password=PASSWORD,
                                 frame_max=FRAME_MAX)
        await self.consumer.start()
        self.received = 0
        self.arrived = asyncio.Event()
        self.confirmed = 0
        self.all_confirmed = asyncio.Event()
        self.subscriptions: list[int] = []
        self.stale: list[int] = []
        if spec.group is not None:
            self.reading = member_partitions(self.options, spec.actor_id, spec.stream,
                                             spec.partitions)
        else:
            self.reading = [spec.partition or 0]

    def _on_confirm(self, status: ConfirmationStatus) -> None:
        self.confirmed += 1
        if self.confirmed >= len(self.payloads):
            self.all_confirmed.set()

    async def send(self) -> int:
        """Raises rstream's errors; a negative confirm fails the batch."""
        self.confirmed = 0
        self.all_confirmed.clear()
        await self.producer.send_batch(self.streams[self.next_partition()], self.payloads,
                                       on_publish_confirm=self._on_confirm)
        await self.all_confirmed.wait()
        return len(self.payloads)

    def _on_message(self, _message: bytes, _context) -> None:
        self.received += 1
        self.arrived.set()

    async def _subscribe(self) -> None:
        first = ConsumerOffsetSpecification(OffsetType.FIRST, None)
        for p in self.reading:
            self.subscriptions.append(await self.consumer.subscribe(
                self.streams[p], self._on_message, decoder=_identity, offset_specification=first))

    async def poll(self) -> int:
        if self.stale:
            old, self.stale = self.stale, []
            for subscription in old:
                await self.consumer.unsubscribe(subscription)
            self.received = 0
        if not self.subscriptions and self.reading:
            await self._subscribe()
        if not self.received:
            try:
                await asyncio.wait_for(self.arrived.wait(), POLL_WAIT_S)
            except asyncio.TimeoutError:
                return 0
        got, self.received = self.received, 0
        self.arrived.clear()
        return got

    def rewind(self) -> None:
        """The next poll drops the subscriptions and reads from the first offset again."""
        self.stale, self.subscriptions = self.subscriptions, []

    async def close(self) -> None:
        await self.producer.close()
        await self.consumer.close()


def _identity(raw: bytes) -> bytes:
    return raw


DRIVER = RabbitMqDriver
