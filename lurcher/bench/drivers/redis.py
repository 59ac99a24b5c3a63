"""The Redis Streams driver: redis-py (hiredis parser when installed), blocking client.

One stream key per (stream, partition): ``bench-stream-S:P``, field ``p`` = payload.
``send`` pipelines one ``XADD key * p payload`` per message: the pipeline is packed once in
``open`` with redis-py's ``Connection.pack_commands`` and re-sent as is, then the replies are
read (redis-py reads them one by one; that part is per message in the client). Plain consumers
read with ``XRANGE key (last + COUNT n``; group members with ``XREADGROUP ... COUNT n NOACK``,
one partition key per poll, round-robin. Replies of XRANGE/XREADGROUP are kept raw (no
per-message dict building) by replacing redis-py's response callbacks for those two commands.

The blocking client is used on purpose: actors are single-purpose processes, and redis-py's
blocking client is faster than its asyncio one; the ``async`` methods never suspend.
"""

from __future__ import annotations

import redis

from lurcher.bench.drivers import Driver
from lurcher.bench.options import BenchOptions
from lurcher.bench.workloads import Layout, group_name, stream_name

START = b"-"


def stream_key(stream: int, partition: int) -> str:
    return f"{stream_name(stream)}:{partition}"


def connect(address: str) -> redis.Redis:
    host, _, port = address.rpartition(":")
    r = redis.Redis(host=host, port=int(port), protocol=2)
    for command in ("XRANGE", "XREADGROUP"):
        r.set_response_callback(command, _raw)
    return r


def _raw(response, **_options):
    return response


async def prepare(address: str, options: BenchOptions, layout: Layout) -> None:
    """Delete stale bench keys, create one consumer group per partition key when needed."""
    r = connect(address)
    try:
        stale = list(r.scan_iter(match="bench-stream-*", count=1000))
        if stale:
            r.delete(*stale)
        if layout.groups:
            for s in range(1, layout.streams + 1):
                for p in range(layout.partitions):
                    r.xgroup_create(stream_key(s, p), group_name(s), id="0", mkstream=True)
    finally:
        r.close()


class RedisDriver(Driver):
    async def open(self) -> None:
        self.r = connect(self.address)
        self.r.ping()
        spec = self.spec
        self.keys = [stream_key(spec.stream, p) for p in range(spec.partitions)]
        self.conn = self.r.connection_pool.get_connection()
        self.packed = [self.conn.pack_commands([("XADD", key, "*", "p", pl)
                                                for pl in self.payloads])
                       for key in self.keys]
        self.count = self.options.messages_per_batch
        self.position = START
        self.group = None if spec.group is None else group_name(spec.group)
        self.member = f"consumer-{spec.actor_id}"

    async def send(self) -> int:
        """Raises redis.ResponseError for a failed XADD."""
        conn = self.conn
        conn.send_packed_command(self.packed[self.next_partition()], check_health=False)
        for _ in range(len(self.payloads)):
            conn.read_response()
        return len(self.payloads)

    async def poll(self) -> int:
        if self.group is not None:
            key = self.keys[self.next_partition()]
            reply = self.r.execute_command("XREADGROUP", "GROUP", self.group, self.member,
                                           "COUNT", self.count, "NOACK", "STREAMS", key, ">")
            return len(reply[0][1]) if reply else 0
        key = self.keys[self.spec.partition or 0]
        reply = self.r.execute_command("XRANGE", key, self.position, "+", "COUNT", self.count)
        if reply:
            self.position = b"(" + reply[-1][0]
        return len(reply)

    def rewind(self) -> None:
        self.position = START

    async def close(self) -> None:
        self.r.connection_pool.release(self.conn)
        self.r.close()


DRIVER = RedisDriver
