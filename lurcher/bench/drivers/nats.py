"""The NATS JetStream driver: nats-py.

One JetStream stream (file storage) per (stream, partition): stream ``bench-stream-S-pP``
on subject ``bench.S.P``. ``send`` publishes every message of the batch with
``publish_async`` and then awaits all acks at once (``publish_async_completed``), nats-py's
batching primitive. Plain consumers use an ephemeral pull consumer (deliver all, no acks)
and ``fetch(n)``; group members share one durable pull consumer per partition stream (no
acks: each message goes to one member), one partition per poll, round-robin.
"""

from __future__ import annotations

import asyncio

import nats
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType

from lurcher.bench.drivers import Driver
from lurcher.bench.options import BenchOptions
from lurcher.bench.workloads import Layout, group_name, stream_name

FETCH_TIMEOUT_S = 0.05
MAX_PENDING = 1 << 16


def js_stream(stream: int, partition: int) -> str:
    return f"{stream_name(stream)}-p{partition}"


def subject(stream: int, partition: int) -> str:
    return f"bench.{stream}.{partition}"


def consumer_config(durable: str | None = None) -> ConsumerConfig:
    return ConsumerConfig(durable_name=durable, ack_policy=AckPolicy.NONE,
                          deliver_policy=DeliverPolicy.ALL)


async def prepare(address: str, options: BenchOptions, layout: Layout) -> None:
    """Delete stale bench streams, create one file-backed stream per partition, and one
    durable consumer per (group, partition) when groups are used."""
    nc = await nats.connect(f"nats://{address}")
    try:
        js = nc.jetstream()
        for name in await js.streams_info():
            if name.config.name.startswith("bench-stream-"):
                await js.delete_stream(name.config.name)
        for s in range(1, layout.streams + 1):
            for p in range(layout.partitions):
                await js.add_stream(name=js_stream(s, p), subjects=[subject(s, p)],
                                    storage=StorageType.FILE)
                if layout.groups:
                    await js.add_consumer(js_stream(s, p), consumer_config(group_name(s)))
    finally:
        await nc.close()


class NatsDriver(Driver):
    async def open(self) -> None:
        self.nc = await nats.connect(f"nats://{self.address}")
        self.js = self.nc.jetstream(publish_async_max_pending=MAX_PENDING)
        spec = self.spec
        self.subjects = [subject(spec.stream, p) for p in range(spec.partitions)]
        self.count = self.options.messages_per_batch
        self.group = None if spec.group is None else group_name(spec.group)
        self.subs = []
        if self.group is not None:
            for p in range(spec.partitions):
                self.subs.append(await self.js.pull_subscribe_bind(
                    self.group, stream=js_stream(spec.stream, p)))
        self._sub = None

    async def send(self) -> int:
        subj = self.subjects[self.next_partition()]
        publish = self.js.publish_async
        for payload in self.payloads:
            await publish(subj, payload)
        await self.js.publish_async_completed()
        return len(self.payloads)

    async def _plain(self):
        if self._sub is None:
            p = self.spec.partition or 0
            self._sub = await self.js.pull_subscribe(
                self.subjects[p], stream=js_stream(self.spec.stream, p), config=consumer_config())
        return self._sub

    async def poll(self) -> int:
        sub = self.subs[self.next_partition()] if self.group is not None else await self._plain()
        try:
            return len(await sub.fetch(self.count, timeout=FETCH_TIMEOUT_S))
        except (nats.errors.TimeoutError, asyncio.TimeoutError):
            return 0

    def rewind(self) -> None:
        if self._sub is not None:
            old, self._sub = self._sub, None
            asyncio.get_running_loop().create_task(old.unsubscribe())

    async def close(self) -> None:
        await self.nc.close()


DRIVER = NatsDriver
