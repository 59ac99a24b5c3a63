"""The lurcher driver: the SDK's ``Client`` over the chosen transport.

``open`` builds one ``MessageBatch`` (vectorised) and every ``send`` re-sends it; ``poll``
reads ``messages_count`` from the response prefix and never parses messages. Plain
consumers poll by offset (advancing by what they got); group members poll Next with
auto-commit, as Iggy's benchmark does. Against a cluster (comma-separated addresses) each
actor talks to one node, taken in turn by actor id; the topics are created on the first,
with the ``--replication-factor`` asked.
"""

from __future__ import annotations

from lurcher.bench.cluster import node_address
from lurcher.bench.drivers import Driver
from lurcher.bench.options import BenchOptions, connection_fields
from lurcher.bench.workloads import TOPIC, Layout, group_name, stream_name
from lurcher.core.wire.batch import MessageBatch
from lurcher.sdk.client import Client

BENCH_PREFIX = "bench-stream-"


def client(address: str, options: BenchOptions) -> Client:
    """A client of ``address`` with the run's transport and ``--connection-option``s (no
    heartbeat unless one is asked for)."""
    fields = {"heartbeat_interval_s": None, **connection_fields(options)}
    return Client(address, username=options.username, password=options.password,
                  transport=options.transport, **fields)


async def prepare(address: str, options: BenchOptions, layout: Layout) -> None:
    """Delete stale bench streams, then create streams, topics and groups. Raises IggyError."""
    c = client(node_address(address, 0), options)
    await c.connect()
    try:
        for s in await c.get_streams():
            if s.name.startswith(BENCH_PREFIX):
                await c.delete_stream(s.name)
        for i in range(1, layout.streams + 1):
            await c.create_stream(stream_name(i))
            await c.create_topic(stream_name(i), TOPIC, layout.partitions,
                                 replication_factor=options.replication_factor)
            if layout.groups:
                await c.create_consumer_group(stream_name(i), TOPIC, group_name(i))
    finally:
        await c.close()


class LurcherDriver(Driver):
    async def open(self) -> None:
        self.client = client(node_address(self.address, self.spec.actor_id), self.options)
        await self.client.connect()
        self.stream = stream_name(self.spec.stream)
        self.batch = MessageBatch.build(self.payloads)
        self.count = self.options.messages_per_batch
        self.offset = 0
        self.group = None if self.spec.group is None else group_name(self.spec.group)
        if self.group is not None:
            await self.client.join_consumer_group(self.stream, TOPIC, self.group)

    async def send(self) -> int:
        await self.client.send_messages(self.stream, TOPIC, self.batch, self.spec.partition)
        return self.batch.count

    async def poll(self) -> int:
        if self.group is not None:
            polled = await self.client.poll_messages(self.stream, TOPIC, None, "next", self.count,
                                                     True, consumer=self.group, group=True)
            return polled.messages_count
        polled = await self.client.poll_messages(self.stream, TOPIC, self.spec.partition,
                                                 self.offset, self.count,
                                                 consumer=self.spec.actor_id)
        self.offset += polled.messages_count
        return polled.messages_count

    def rewind(self) -> None:
        self.offset = 0

    async def close(self) -> None:
        await self.client.close()


DRIVER = LurcherDriver
