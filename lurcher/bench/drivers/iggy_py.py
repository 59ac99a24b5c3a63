"""The ``iggy-py`` target: the official ``apache-iggy`` 0.8.0 Python client against a lurcher
server, to put lurcher's SDK beside it on the same server and workload.

Only the pinned workloads (the official client's consumer-group API has no per-batch
poll). Its API needs one ``SendMessage`` object per message; the list is built once per
actor and re-sent, as lurcher's driver re-sends one prebuilt batch.
"""

from __future__ import annotations

from apache_iggy import IggyClient, PollingStrategy, SendMessage

from lurcher.bench.drivers import Driver
from lurcher.bench.drivers.lurcher import prepare  # noqa: F401  (same server, same layout)
from lurcher.bench.workloads import TOPIC, stream_name


class IggyPyDriver(Driver):
    async def open(self) -> None:
        if self.spec.group is not None:
            raise RuntimeError("the iggy-py target runs the pinned workloads only")
        o = self.options
        self.client = IggyClient.from_connection_string(
            f"iggy://{o.username}:{o.password}@{self.address}")
        await self.client.connect()
        self.stream = stream_name(self.spec.stream)
        self.partition = self.spec.partition or 0
        self.messages = [SendMessage(p) for p in self.payloads]
        self.offset = 0

    async def send(self) -> int:
        await self.client.send_messages(self.stream, TOPIC, self.partition, self.messages)
        return len(self.messages)

    async def poll(self) -> int:
        polled = await self.client.poll_messages(
            self.stream, TOPIC, self.partition, PollingStrategy.Offset(self.offset),
            self.options.messages_per_batch, False)
        self.offset += len(polled)
        return len(polled)

    def rewind(self) -> None:
        self.offset = 0

    async def close(self) -> None:
        return None  # the 0.8.0 client has no close(); its connection ends with the process


DRIVER = IggyPyDriver
