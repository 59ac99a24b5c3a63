"""Target drivers: how one actor process talks to lurcher, NATS JetStream, Redis Streams or
RabbitMQ Streams.

A ``Driver`` is built inside an actor process for one ``ActorSpec``. Its hot-path methods
do per-batch work only where the client allows it: ``send`` re-sends the batch built once in
``open`` (lurcher: one prebuilt wire batch; peers: their client's batching primitive);
``poll`` returns how many messages arrived without looking at them one by one where the
client allows it. ``prepare(address, options, layout)`` (per target module) creates the
streams/topics/groups before actors start, in the coordinating process.

Mapping onto peers: one Redis stream key / one JetStream stream / one RabbitMQ stream per
(stream, partition); a consumer group is a Redis consumer group / a shared durable pull
consumer per partition / a static split of the partitions among the members (RabbitMQ).
"""

from __future__ import annotations

import abc
import importlib
import os
from types import ModuleType

from lurcher.bench.options import BenchOptions
from lurcher.bench.workloads import ActorSpec, Layout

MODULES = {"lurcher": "lurcher.bench.drivers.lurcher", "nats": "lurcher.bench.drivers.nats",
           "redis": "lurcher.bench.drivers.redis", "rabbitmq": "lurcher.bench.drivers.rabbitmq",
           "iggy-py": "lurcher.bench.drivers.iggy_py",
           "lurcher-cluster": "lurcher.bench.drivers.lurcher"}
# target -> pip package needed by its driver
PIP_PACKAGES = {"lurcher": None, "nats": "nats-py", "redis": "redis", "rabbitmq": "rstream",
                "iggy-py": "apache-iggy==0.8.0", "lurcher-cluster": None}


class DriverUnavailable(RuntimeError):
    """The Python client a target needs is not installed."""


def make_payloads(size_bytes: int, count: int) -> list[bytes]:
    """``count`` distinct random payloads of ``size_bytes`` (built once per actor)."""
    blob = os.urandom(size_bytes * count)
    return [blob[i:i + size_bytes] for i in range(0, size_bytes * count, size_bytes)]


def module(target: str) -> ModuleType:
    """The driver module of ``target``. Raises DriverUnavailable naming the pip package."""
    try:
        return importlib.import_module(MODULES[target])
    except ImportError as e:
        raise DriverUnavailable(f"target {target!r} needs the Python package "
                                f"{PIP_PACKAGES[target]!r} (pip install 'lurcher[bench]'): {e}"
                                ) from None


class Driver(abc.ABC):
    """One actor's connection to a target. Subclasses set up in ``open``."""

    def __init__(self, address: str, spec: ActorSpec, options: BenchOptions) -> None:
        self.address = address
        self.spec = spec
        self.options = options
        self.payloads = make_payloads(options.message_size, options.messages_per_batch)
        self._next_partition = 0

    def next_partition(self) -> int:
        """The fixed partition, or round-robin over the stream's partitions (balanced)."""
        if self.spec.partition is not None:
            return self.spec.partition
        p = self._next_partition
        self._next_partition = (p + 1) % self.spec.partitions
        return p

    @abc.abstractmethod
    async def open(self) -> None:
        """Connect, build the batch, join the group. Raises the client's errors."""

    @abc.abstractmethod
    async def send(self) -> int:
        """Send one batch; returns the number of messages acknowledged."""

    @abc.abstractmethod
    async def poll(self) -> int:
        """Poll up to one batch; returns the number of messages received (0: none yet)."""

    def rewind(self) -> None:
        """Make the next ``poll`` read from the start again (plain consumers)."""

    @abc.abstractmethod
    async def close(self) -> None: ...


async def prepare(target: str, address: str, options: BenchOptions, layout: Layout) -> None:
    """Create the streams/topics/groups of ``layout`` on ``target`` (removing stale ones)."""
    await module(target).prepare(address, options, layout)


def driver(target: str, address: str, spec: ActorSpec, options: BenchOptions) -> Driver:
    return module(target).DRIVER(address, spec, options)
