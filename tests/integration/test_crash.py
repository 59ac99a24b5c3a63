"""SIGKILL the server again and again while a writer sends; nothing acknowledged is lost.

A writer thread sends batches over raw TCP (client-chosen unique ids, deterministic
payloads) and records which were acknowledged. The main thread kills the whole server
process group after seeded random delays, restarts it on the same data directory, and
checks, after every restart:

* every acknowledged message is present, in send order, byte for byte (id + payload);
* a batch in flight at the kill is there whole or not at all (never a prefix);
* offsets are dense from 0, checksums are XXH3-64 of the stored message, reserved = 0;
* the segment files parse back to back with no torn record, each index matches its log,
  and the files hold exactly the bytes a poll returns.

A kernel write is rarely torn by SIGKILL, so every ``DAMAGE_EVERY``-th kill also damages
the newest segment the way a torn append would (the log bytes of a batch are written before
its index entries, and the ack follows both): a partial record appended to the log, whole
records of an unacknowledged batch appended without index entries (a log write torn at a
record boundary), or the index entries of the newest batch cut short when that batch was
not acknowledged (a torn index write). Recovery must drop the partial record and the
unindexed batch, and complete the torn index from the log.
"""

from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass, field

import pytest

from lurcher.core.log.segment import METADATA_SLACK
from tests.support import disk, raw
from tests.support.server import LurcherServer, ServerFactory

STREAM = "crash"
TOPIC = "t"
SEED = 20240917
MIN_KILLS = 20
TIME_BUDGET_S = 80.0
KILL_DELAY_S = (0.02, 1.0)
WRITER_PAUSE_S = 0.002
MAX_BATCH_MESSAGES = 40
MAX_PAYLOAD_BYTES = 400
SEGMENT_SIZE = "64KiB"
# "big" rows: batches of up to 40 x 12 KB (about 240 KB on average) into 4 MiB segments, so
# disk blocks are reserved ahead of the log's end (``system.segment.reserve_ahead``)
BIG_PAYLOAD_BYTES = 12_000
BIG_SEGMENT_SIZE = "4MiB"
DAMAGE_EVERY = 3
DAMAGES = ("partial header", "partial payload", "torn index", "unindexed batch prefix")
NEVER_SENT_ID = 0xFEED << 32


@dataclass
class Batch:
    seq: int
    messages: list[tuple[int, bytes]]
    acked: bool = False


@dataclass
class Ledger:
    """What the writers sent, in order, and which batches the server acknowledged."""

    batches: list[Batch] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    max_payload: int = MAX_PAYLOAD_BYTES

    def new_batch(self, rng: random.Random) -> Batch:
        seq = len(self.batches)
        msgs = [((seq + 1) << 32 | i, rng.randbytes(rng.randrange(1, self.max_payload)))
                for i in range(rng.randrange(1, MAX_BATCH_MESSAGES + 1))]
        batch = Batch(seq, msgs)
        self.batches.append(batch)
        return batch


class Writer(threading.Thread):
    """Sends batches until the connection breaks (the server was killed) or ``stop`` is set."""

    def __init__(self, address: str, ledger: Ledger, rng: random.Random) -> None:
        super().__init__(daemon=True)
        self.address = address
        self.ledger = ledger
        self.rng = rng
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            client = raw.RawClient(self.address, timeout_s=5.0)
            client.login()
        except (OSError, raw.StatusError):
            return
        with client:
            while not self.stop.is_set():
                batch = self.ledger.new_batch(self.rng)
                wire = [raw.message(p, message_id=mid) for mid, p in batch.messages]
                try:
                    client.send(STREAM, TOPIC, raw.partition_id(0), wire)
                except raw.StatusError as exc:
                    self.ledger.failures.append(f"batch {batch.seq}: status {exc.status}")
                    return
                except (OSError, raw.PeerClosed):
                    return
                batch.acked = True
                time.sleep(WRITER_PAUSE_S)


def damage_newest_segment(server: LurcherServer, how: str, rng: random.Random,
                          ledger: Ledger) -> None:
    """Simulate a torn append on the newest segment of the (dead) server's only partition."""
    assert server.data_dir is not None and not server.running
    dirs = disk.partition_dirs(server.data_dir)
    if not dirs:
        return
    log_path = disk.segments(dirs[0])[-1]
    index_path = log_path.with_suffix(".index")
    disk.drop_block_padding(log_path)
    if how == "partial header":
        with open(log_path, "ab") as f:
            f.write(rng.randbytes(rng.randrange(1, 64)))
    elif how == "partial payload":
        torn = raw.message(rng.randbytes(500), message_id=0xDEAD, offset=1 << 40)
        with open(log_path, "ab") as f:
            f.write(torn[:rng.randrange(64, len(torn))])
    elif how == "torn index":
        tear_index_of_unacked_batch(log_path, index_path, ledger, rng)
    elif how == "unindexed batch prefix":
        append_unindexed_prefix(log_path, rng)


def tear_index_of_unacked_batch(log_path, index_path, ledger: Ledger,
                                rng: random.Random) -> None:
    """Cut the index inside the newest batch, if that batch was never acknowledged. A kill
    between the creation of a new segment's log and its index leaves no index (and an empty
    log): nothing to cut."""
    if not index_path.exists():
        return
    messages, _ = disk.whole_messages(log_path)
    entries = index_path.read_bytes()
    count = len(entries) // 16
    if not messages or count == 0 or count > len(messages):
        return
    last = messages[count - 1]
    seq = (last.message_id >> 32) - 1
    if not 0 <= seq < len(ledger.batches) or ledger.batches[seq].acked:
        return
    run = [m for m in messages[:count] if m.timestamp == last.timestamp]
    keep = count - len(run) + rng.randrange(0, len(run))
    os.truncate(index_path, keep * 16 + rng.randrange(0, 16))


def append_unindexed_prefix(log_path, rng: random.Random) -> None:
    """Whole records of a batch nobody sent, after the last one, with no index entries."""
    payloads = [rng.randbytes(rng.randrange(1, 300)) for _ in range(rng.randrange(1, 6))]
    disk.append_unindexed_batch(log_path, payloads, NEVER_SENT_ID)


def verify(server: LurcherServer, ledger: Ledger, cycle: int) -> int:
    """All checks of one restart; returns the number of stored messages."""
    with raw.RawClient(server.tcp_address, timeout_s=30.0) as c:
        c.login()
        stored = c.poll_all(STREAM, TOPIC, 0, batch=5000)
    where = f"after restart {cycle}"
    assert [m.offset for m in stored] == list(range(len(stored))), f"{where}: offsets not dense from 0"
    pos = 0
    for batch in ledger.batches:
        n = 0
        while n < len(batch.messages) and pos + n < len(stored):
            mid, payload = batch.messages[n]
            m = stored[pos + n]
            if m.message_id != mid:
                break
            assert m.payload == payload, f"{where}: payload of id {mid:#x} (offset {m.offset}) differs"
            n += 1
        if batch.acked or n:
            assert n == len(batch.messages), (
                f"{where}: {'acknowledged' if batch.acked else 'unacknowledged'} batch "
                f"{batch.seq} has {n} of {len(batch.messages)} messages at offset {pos}")
        pos += n
    assert pos == len(stored), f"{where}: {len(stored) - pos} stored messages were never sent (from offset {pos})"
    for m in stored:
        assert m.checksum_ok(), f"{where}: bad checksum at offset {m.offset}"
        assert m.reserved == 0 and m.headers == b""
    stamps = [m.timestamp for m in stored]
    assert stamps == sorted(stamps), f"{where}: timestamps go backwards"
    check_files(server, stored, where)
    return len(stored)


def check_files(server: LurcherServer, stored: list[raw.PolledMessage], where: str) -> None:
    assert server.data_dir is not None
    dirs = disk.partition_dirs(server.data_dir)
    assert len(dirs) == 1, f"{where}: expected one partition directory with segments, found {dirs}"
    try:
        on_disk = disk.read_partition(dirs[0])
    except ValueError as exc:
        pytest.fail(f"{where}: {exc}")
    assert len(on_disk) == len(stored), f"{where}: {len(on_disk)} messages on disk, {len(stored)} polled"
    assert all(a.raw == b.raw for a, b in zip(on_disk, stored)), f"{where}: disk bytes differ from polled bytes"
    for log_path in disk.segments(dirs[0]):  # blocks reserved before the kill went back
        assert disk.blocks_past_end(log_path) <= METADATA_SLACK, f"{where}: {log_path.name} reserved"


@pytest.mark.slow
@pytest.mark.parametrize("io,enforce_fsync,direct_io,inline,big", [
    ("uring", False, False, True, False), ("posix", False, False, True, False),
    ("uring", True, False, True, False), ("posix", True, False, True, False),
    ("uring", False, True, True, False), ("posix", True, True, True, False),
    # the writer's batches are small: by default they are written on the event loop; these
    # two send every one through the io_uring ring or the writer thread instead
    ("uring", False, False, False, False), ("posix", False, False, False, False),
    # big batches: asynchronous writes with blocks reserved ahead
    ("uring", False, False, True, True), ("posix", True, False, True, True)])
def test_sigkill_loses_nothing_acknowledged(server_factory: ServerFactory, io: str,
                                            enforce_fsync: bool, direct_io: bool,
                                            inline: bool, big: bool) -> None:
    server = server_factory({
        "LURCHER_SYSTEM_SEGMENT_SIZE": BIG_SEGMENT_SIZE if big else SEGMENT_SIZE,
        "LURCHER_SYSTEM_IO": io,
        "LURCHER_SYSTEM_SEGMENT_DIRECT_IO": str(direct_io).lower(),
        "LURCHER_SYSTEM_PARTITION_ENFORCE_FSYNC": str(enforce_fsync).lower(),
        "LURCHER_SYSTEM_PARTITION_INLINE_WRITE_MAX_BYTES": "65536" if inline else "0",
    })
    with raw.RawClient(server.tcp_address) as c:
        c.login()
        c.create_stream(STREAM)
        c.create_topic(STREAM, TOPIC, 1)
    rng = random.Random(SEED)
    ledger = Ledger(max_payload=BIG_PAYLOAD_BYTES if big else MAX_PAYLOAD_BYTES)
    started = time.monotonic()
    kills = 0
    stored = 0
    while kills < MIN_KILLS and time.monotonic() - started < TIME_BUDGET_S:
        writer = Writer(server.tcp_address, ledger, random.Random(rng.random()))
        writer.start()
        time.sleep(rng.uniform(*KILL_DELAY_S))
        server.kill()
        kills += 1
        writer.join(10)
        assert not writer.is_alive(), "writer did not notice the kill"
        assert not ledger.failures, ledger.failures
        if kills % DAMAGE_EVERY == 0:
            damage_newest_segment(server, DAMAGES[kills // DAMAGE_EVERY % len(DAMAGES)], rng,
                                  ledger)
        server.restart()
        stored = verify(server, ledger, kills)
    acked = sum(len(b.messages) for b in ledger.batches if b.acked)
    assert kills >= MIN_KILLS, f"only {kills} kills within {TIME_BUDGET_S}s"
    assert acked > 1000, f"writer acknowledged only {acked} messages: the test proved little"
    assert stored >= acked
    server.restart()
    assert verify(server, ledger, kills + 1) == stored
    assert server.data_dir is not None
    segment_count = len(disk.segments(disk.partition_dirs(server.data_dir)[0]))
    in_doubt = sum(1 for b in ledger.batches if not b.acked)
    print(f"\ncrash test: {kills} kills, {len(ledger.batches)} batches, {acked} acknowledged messages, "
          f"{stored} stored, {in_doubt} batches in doubt, {segment_count} segments, "
          f"{time.monotonic() - started:.1f}s")
