"""SIGKILL at random moments of a mixed metadata and send workload (issue 14, acceptance).

One client runs a seeded random workload: create/delete streams and topics, create/delete
partitions, and (mostly) sends of small batches to existing partitions. A killer thread
SIGKILLs the whole server after a random delay, whatever it is doing; the op in flight is
"unacknowledged". After each restart:

* metadata: the server's streams, topics and partition counts equal the model of the
  acknowledged operations, with the unacknowledged one either applied or not (the model
  then adopts what the server shows);
* no message appears anywhere it was not sent: each payload names its stream, topic,
  partition and the operation that created that partition's current incarnation (names are
  never reused, so a message of a deleted stream, topic or partition is recognised);
* every acknowledged batch is there; every batch on disk is whole: each payload carries its
  batch id, index and batch size, and a batch is all of its messages in order or absent;
  the segment files parse with no torn record, match their indexes and hold exactly what
  a poll returns;
* no orphan partition directory and no unfinished tombstone remains on disk.

A SIGKILL rarely tears a write in the kernel, so when a send was in flight at the kill the
test tears it the way a kill inside its log write would (the log bytes of a batch are
written before its index entries, the ack after both): the partition's newest segment ends
with only the first records of that batch and no index entries for them. Recovery must
drop them (whole batches or none).

Runs with 1 and 2 shards, and with 1 shard writing segment files O_DIRECT (the padding a
kill leaves there is cut before the tear), at least ``MIN_KILLS`` kills each, within
``TIME_BUDGET_S``.
"""

from __future__ import annotations

import copy
import os
import random
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lurcher.core.wire.responses.streams import StreamDetails, StreamHeader
from tests.support import admin, disk, raw
from tests.support.server import LurcherServer, ServerFactory

SEED = 1414
MIN_KILLS = 12           # per shard count: 24 in total
TIME_BUDGET_S = 150.0
KILL_DELAY_S = (0.05, 0.7)
MAX_STREAMS = 4
MAX_TOPICS = 3
MAX_BATCH = 30
BIG_SENDS = 0.15         # this share of sends carries ~1 MB, so a kill can tear its write
BIG_PADDING = 32 * 1024
GET_STREAM, GET_STREAMS = 200, 201
DISCONNECTED = (raw.PeerClosed, socket.timeout, ConnectionError, OSError)

# model: stream name -> topic name -> list of incarnations (op number per partition id)
Model = dict[str, dict[str, list[int]]]


@dataclass
class Workload:
    """The acknowledged state and the sends, driven by one client."""

    rng: random.Random
    model: Model = field(default_factory=dict)
    next_name: int = 0
    next_op: int = 0
    next_batch: int = 0
    acked: dict[tuple[str, str, int, int], list[int]] = field(default_factory=dict)
    pending: Model | None = None      # the model if the op in flight is applied
    pending_batch: tuple | None = None  # ((stream, topic, partition, incarnation), batch id)
    pending_payloads: list[bytes] = field(default_factory=list)
    ids: dict = field(default_factory=dict)  # stream name / (stream, topic) names -> id
    in_flight: str = ""               # the last operation started (for failure messages)

    def name(self, prefix: str) -> str:
        self.next_name += 1
        return f"{prefix}{self.next_name}"

    def step(self, client: raw.RawClient) -> None:
        """One random operation; updates the model once it is acknowledged."""
        self.next_op += 1
        op, after = self.choose()
        self.pending = after
        op(client)
        if after is not None:
            self.model = after
        if self.pending_batch is not None:
            key, batch = self.pending_batch
            self.acked.setdefault(key, []).append(batch)
        self.pending = self.pending_batch = None

    def choose(self):
        m, rng, n = self.model, self.rng, self.next_op
        partitions = [(s, t, p) for s in m for t in m[s] for p in range(len(m[s][t]))]
        roll = rng.random()
        if partitions and roll < 0.6:
            return self.send_op(*rng.choice(partitions)), None
        after = copy.deepcopy(m)
        streams = list(m)
        if not streams or (roll < 0.68 and len(streams) < MAX_STREAMS):
            name = self.name("s")
            after[name] = {}
            self.in_flight = f"create stream {name}"
            return (lambda c: self.ids.__setitem__(name, c.create_stream(name))), after
        s = rng.choice(streams)
        if roll < 0.73:
            del after[s]
            self.in_flight = f"delete stream {s}"
            return (lambda c: admin.delete_stream(c, s)), after
        topics = list(m[s])
        if not topics or (roll < 0.82 and len(topics) < MAX_TOPICS):
            t, count = self.name("t"), rng.randint(1, 3)
            after[s][t] = [n] * count
            self.in_flight = f"create topic {s}/{t} with {count} partitions"
            return (lambda c: self.ids.__setitem__((s, t), c.create_topic(s, t, count))), after
        t = rng.choice(topics)
        if roll < 0.87:
            del after[s][t]
            self.in_flight = f"delete topic {s}/{t}"
            return (lambda c: admin.delete_topic(c, s, t)), after
        if roll < 0.94 or len(m[s][t]) < 2:
            count = rng.randint(1, 2)
            after[s][t] += [n] * count
            self.in_flight = f"create {count} partitions in {s}/{t}"
            return (lambda c: admin.create_partitions(c, s, t, count)), after
        count = rng.randint(1, len(m[s][t]) - 1)
        del after[s][t][-count:]
        self.in_flight = f"delete {count} partitions of {s}/{t}"
        return (lambda c: admin.delete_partitions(c, s, t, count)), after

    def send_op(self, s: str, t: str, p: int):
        self.next_batch += 1
        batch, n = self.next_batch, self.rng.randint(1, MAX_BATCH)
        incarnation = self.model[s][t][p]
        self.pending_batch = ((s, t, p, incarnation), batch)
        padding = BIG_PADDING if self.rng.random() < BIG_SENDS else 200
        self.pending_payloads = [encode(s, t, p, incarnation, batch, i, n)
                                 + self.rng.randbytes(self.rng.randrange(0, padding))
                                 for i in range(n)]
        messages = [raw.message(payload) for payload in self.pending_payloads]
        self.in_flight = f"send batch {batch} ({n} messages) to {s}/{t}/{p}"
        return lambda c: c.send(s, t, raw.partition_id(p), messages)


def encode(s: str, t: str, p: int, incarnation: int, batch: int, i: int, n: int) -> bytes:
    return f"{s}|{t}|{p}|{incarnation}|{batch}|{i}|{n}|".encode()


def decode(payload: bytes) -> tuple[str, str, int, int, int, int, int]:
    s, t, p, inc, batch, i, n = payload.split(b"|")[:7]
    return s.decode(), t.decode(), int(p), int(inc), int(batch), int(i), int(n)


# -- what the server shows -----------------------------------------------------------------

def server_metadata(client: raw.RawClient) -> tuple[dict[str, dict[str, int]], set, dict]:
    """Stream name -> topic name -> partitions count; (stream id, topic id, partition) of
    every partition the metadata knows; and the ids by name (as ``Workload.ids``)."""
    shape: dict[str, dict[str, int]] = {}
    keys = set()
    ids: dict = {}
    for header in StreamHeader.decode_list(client.call(GET_STREAMS)):
        details = StreamDetails.decode_exact(client.call(GET_STREAM, raw.ident(header.id)))
        shape[header.name] = {t.name: t.partitions_count for t in details.topics}
        keys |= {(header.id, t.id, p) for t in details.topics for p in range(t.partitions_count)}
        ids[header.name] = header.id
        ids.update({(header.name, t.name): t.id for t in details.topics})
    return shape, keys, ids


def shape_of(model: Model) -> dict[str, dict[str, int]]:
    return {s: {t: len(parts) for t, parts in topics.items()} for s, topics in model.items()}


def check_metadata(work: Workload, shown: dict[str, dict[str, int]], where: str) -> None:
    """The server shows the acknowledged model, or it with the op in flight applied."""
    if shown == shape_of(work.model):
        return
    assert work.pending is not None and shown == shape_of(work.pending), (
        f"{where}: metadata {shown} is neither the acknowledged {shape_of(work.model)} nor "
        f"that plus the unacknowledged op {None if work.pending is None else shape_of(work.pending)}")
    work.model = work.pending


def partition_dir(server: LurcherServer, work: Workload, s: str, t: str, p: int) -> Path:
    return (Path(server.data_dir) / "streams" / str(work.ids[s]) / "topics"
            / str(work.ids[(s, t)]) / "partitions" / str(p))


def check_partition(client: raw.RawClient, server: LurcherServer, work: Workload, s: str,
                    t: str, p: int, where: str) -> None:
    incarnation = work.model[s][t][p]
    stored = client.poll_all(s, t, p)
    try:
        on_disk = disk.read_partition(partition_dir(server, work, s, t, p))
    except ValueError as exc:
        pytest.fail(f"{where}: {s}/{t}/{p}: {exc}")
    assert [m.raw for m in on_disk] == [m.raw for m in stored], (
        f"{where}: {s}/{t}/{p}: the segment files differ from what a poll returns")
    batches: list[tuple[int, list[int], int]] = []
    for m in stored:
        ms, mt, mp, minc, batch, i, n = decode(m.payload)
        assert (ms, mt, mp, minc) == (s, t, p, incarnation), (
            f"{where}: {s}/{t}/{p} (incarnation {incarnation}) holds a message sent to "
            f"{ms}/{mt}/{mp} (incarnation {minc})")
        if not batches or batches[-1][0] != batch:
            batches.append((batch, [], n))
        batches[-1][1].append(i)
    for batch, indexes, n in batches:
        assert indexes == list(range(n)), (
            f"{where}: {s}/{t}/{p} batch {batch} stored as {indexes} of {n} messages")
    present = [b for b, _, _ in batches]
    acked = work.acked.get((s, t, p, incarnation), [])
    missing = sorted(set(acked) - set(present))
    assert not missing, f"{where}: {s}/{t}/{p} lost acknowledged batches {missing}"
    assert present == sorted(present), f"{where}: {s}/{t}/{p} batches out of order"


def verify(server: LurcherServer, work: Workload, cycle: int, torn: bool) -> None:
    where = (f"after kill {cycle} during op {work.next_op} ({work.in_flight}"
             f"{', torn by the test' if torn else ''})")
    with raw.RawClient(server.tcp_address, timeout_s=30.0) as client:
        client.login()
        shown, keys, work.ids = server_metadata(client)
        check_metadata(work, shown, where)
        for s, topics in work.model.items():
            for t, parts in topics.items():
                for p in range(len(parts)):
                    check_partition(client, server, work, s, t, p, where)
    data = Path(server.data_dir)
    assert admin.partition_keys(data) == keys, (
        f"{where}: partition directories {sorted(admin.partition_keys(data) - keys)} are not "
        f"in the metadata, {sorted(keys - admin.partition_keys(data))} are missing")
    assert admin.tombstones(data) == [], f"{where}: unfinished deletions left"
    work.pending = work.pending_batch = None


def run_until_killed(server: LurcherServer, work: Workload, delay_s: float) -> None:
    """Run the workload until the killer's SIGKILL breaks the connection."""
    killer = threading.Timer(delay_s, server.kill)
    killer.start()
    try:
        with raw.RawClient(server.tcp_address, timeout_s=10.0) as client:
            client.login()
            while True:
                work.step(client)
    except DISCONNECTED:
        pass
    finally:
        killer.join()


def tear_in_flight_send(server: LurcherServer, work: Workload, rng: random.Random) -> bool:
    """Leave the newest segment of the partition a send was in flight to ending with only
    the first records of that batch and no index entries for them. True when torn."""
    if work.pending_batch is None or len(work.pending_payloads) < 2:
        return False
    (s, t, p, _), batch = work.pending_batch
    directory = partition_dir(server, work, s, t, p)
    logs = disk.segments(directory) if directory.is_dir() else []
    if not logs:
        return False
    log_path, keep = logs[-1], rng.randrange(1, len(work.pending_payloads))
    if not log_path.with_suffix(".index").exists():
        return False  # killed between creating a new segment's log and its index: the server
        # writes no byte to a log before both exist, so no batch can be torn there
    disk.drop_block_padding(log_path)
    messages, clean = disk.whole_messages(log_path)
    mine = [i for i, m in enumerate(messages) if decode(m.payload)[4] == batch]
    if not mine:
        return disk.append_unindexed_batch(log_path, work.pending_payloads[:keep],
                                           rng.getrandbits(60) | 1)
    if not clean or mine != list(range(mine[0], len(messages))):
        return False
    first = mine[0]
    os.truncate(log_path, sum(len(m.raw) for m in messages[:first + keep]))
    index_path = log_path.with_suffix(".index")
    os.truncate(index_path, min(index_path.stat().st_size, first * 16))
    return True


@pytest.mark.slow
@pytest.mark.parametrize("shards,direct_io", [(1, False), (2, False), (1, True)],
                         ids=["1-page-cache", "2-page-cache", "1-direct"])
def test_random_sigkills_keep_metadata_messages_and_batches_whole(
        server_factory: ServerFactory, shards: int, direct_io: bool) -> None:
    server = server_factory({"LURCHER_SYSTEM_SHARDING_SHARDS": str(shards),
                             "LURCHER_SYSTEM_SEGMENT_SIZE": "256KiB",
                             "LURCHER_SYSTEM_SEGMENT_DIRECT_IO": str(direct_io).lower()})
    rng = random.Random(SEED + shards)
    work = Workload(random.Random(rng.random()))
    started = time.monotonic()
    kills = tears = 0
    # at least MIN_KILLS kills, and on until one of them caught a send in flight (which
    # kill does depends on timing): batch atomicity is always put to the test
    while (kills < MIN_KILLS or not tears) and time.monotonic() - started < TIME_BUDGET_S:
        run_until_killed(server, work, rng.uniform(*KILL_DELAY_S))
        kills += 1
        torn = tear_in_flight_send(server, work, rng)
        tears += torn
        server.restart()
        verify(server, work, kills, torn)
    assert kills >= MIN_KILLS, f"only {kills} kills within {TIME_BUDGET_S}s"
    assert tears >= 1, "no send was in flight at any kill: nothing tested batch atomicity"
    assert work.next_op > 5 * kills, f"only {work.next_op} operations ran"
