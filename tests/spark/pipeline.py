"""The exactly-once pipeline harness (``pipeline_driver.py`` as a killable process).

``run_with_kills`` produces into topic A while the driver runs, SIGKILLs the driver's
whole process group (Python driver, its JVM, their Python workers) at random points after
it made progress, restarts it from its checkpoint, and finally lets it finish; it
returns what a test checks: topic B per partition, the consumer offsets the query
committed, and how many kills left a micro-batch planned but not committed (Spark replays
those, so those are the kills that exercise deduplication).

A driver that has not printed "started" (its query is not running yet) within
``STARTUP_S`` is killed and started again, at most ``STARTUP_RESTARTS`` times per run, and
the restart is written to the outcome's log. Once, in CI, a driver's Spark start-up hung
for 300 s before the query ran: the executor registered but got no task and the driver
never connected to the server. Killing a driver at any point is what this harness does
anyway, so such a restart is one more kill the exactly-once checks must survive; a driver
that hangs after it started still fails the test. So does one that dies, unless Spark's
own plumbing killed it (a Python worker that missed Spark's fixed 10 s to connect back,
once in CI, ``WORKER_PLUMBING``): that one is started again the same way.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from lurcher.sdk.sync import SyncClient
from lurcher.spark.offsets import offset_positions
from tests.spark.lurcher_data import payload
from tests.support.server import LurcherServer

PARTITIONS = 3
FIRST = 900  # messages per partition before the first start
MORE = 300  # messages per partition added after each kill
WAIT_S = 300.0
STARTUP_S = 120.0
STARTUP_RESTARTS = 2
# Spark's message when a Python worker it started did not authenticate within its fixed
# 10 s (PythonWorkerFactory.createSimpleWorker): a stalled CI machine, not the pipeline
WORKER_PLUMBING = b"Python worker failed to connect back"
CONSUMER = "spark-pipeline"
DEDUP_ENV = {
    "LURCHER_SYSTEM_MESSAGE_DEDUPLICATION_ENABLED": "true",
    "LURCHER_SYSTEM_MESSAGE_DEDUPLICATION_EXPIRY": "30 m",
    "LURCHER_SYSTEM_MESSAGE_DEDUPLICATION_MAX_ENTRIES": "0",
}
DRIVER = Path(__file__).with_name("pipeline_driver.py")


@dataclass
class Outcome:
    sink: dict[int, list[bytes]]
    expected: dict[int, list[bytes]]
    committed: dict[int, int | None]
    expected_committed: dict[int, int | None] = field(default_factory=dict)
    replays: int = 0
    kills: int = 0
    log: list[str] = field(default_factory=list)


def transformed(partition: int, count: int) -> list[bytes]:
    return [b"T:" + payload(partition, i) for i in range(count)]


def _stored(client: SyncClient, stream: str, topic: str) -> int:
    return sum(p.messages_count for p in client.get_topic(stream, topic).partitions)


def _produce(client: SyncClient, stream: str, first: int, count: int) -> None:
    for p in range(PARTITIONS):
        client.send_messages(stream, "A", [payload(p, i) for i in range(first, first + count)],
                             p)


def _last_batch(checkpoint: Path, log: str) -> int:
    names = [int(n.name) for n in (checkpoint / log).glob("[0-9]*") if n.name.isdigit()]
    return max(names, default=-1)


def _batch_end(checkpoint: Path, batch: int) -> dict[int, int]:
    """The source end offsets of micro-batch ``batch`` in the checkpoint's offset log
    (its last line is the lurcher source's offset JSON)."""
    if batch < 0:
        return {}
    last = (checkpoint / "offsets" / str(batch)).read_text().strip().splitlines()[-1]
    return {int(p): end for p, end in offset_positions(json.loads(last)).items()}


def expected_commits(checkpoint: Path) -> dict[int, int | None]:
    """What ``commitConsumer`` must have stored once the query is idle: Spark commits a
    batch's source progress when it plans the next batch, so the offsets trail by one
    micro-batch: the last offset of the batch before the last one."""
    ends = _batch_end(checkpoint, _last_batch(checkpoint, "commits") - 1)
    return {p: (ends[p] - 1 if ends.get(p) else None) for p in range(PARTITIONS)}


class Driver:
    """One run of ``pipeline_driver.py`` in its own process group."""

    def __init__(self, master: str, server: LurcherServer, stream: str, work: Path,
                 env: dict[str, str], exactly_once: bool = True) -> None:
        connection = f"iggy://iggy:iggy@{server.tcp_address}"
        self.out = open(work / "driver.out", "ab")
        self.out_path, self.out_start = work / "driver.out", self.out.tell()
        self.proc = subprocess.Popen(
            [sys.executable, str(DRIVER), master, connection, stream, "A", "B",
             str(work / "checkpoint"), CONSUMER, str(exactly_once).lower()],
            env=env, cwd=work, stdin=subprocess.DEVNULL, stdout=self.out,
            stderr=subprocess.STDOUT, start_new_session=True)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> bytes:
        """What this run printed so far."""
        with open(self.out_path, "rb") as out:
            out.seek(self.out_start)
            return out.read()

    def started(self) -> bool:
        """Its streaming query is running (the driver printed "started")."""
        return any(line.strip() == b"started" for line in self.output().splitlines())

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.out.close()


def _started_driver(master: str, server: LurcherServer, stream: str, work: Path,
                    env: dict[str, str], exactly_once: bool, log: list[str]) -> Driver:
    """A driver whose query started (or that died trying: the caller's wait reports it);
    one stuck in start-up past ``STARTUP_S`` is killed and started again (logged)."""
    for attempt in range(STARTUP_RESTARTS + 1):
        driver = Driver(master, server, stream, work, env, exactly_once)
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline and driver.alive() and not driver.started():
            time.sleep(0.2)
        if driver.started() or not driver.alive() or attempt == STARTUP_RESTARTS:
            return driver
        driver.kill()
        log.append(f"driver start-up hung for {STARTUP_S:.0f} s before its query ran; "
                   f"killed and started again")
    raise AssertionError("unreachable")


def _wait(predicate, what: str, driver: Driver, work: Path, state=lambda: "") -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if predicate():
            return
        if not driver.alive():
            break
        time.sleep(0.2)
    tail = (work / "driver.out").read_text(errors="replace")[-4000:]
    raise AssertionError(f"pipeline: no {what} (driver alive: {driver.alive()}) "
                         f"{state()}:\n{tail}")


def _until(predicate, what: str, driver: Driver, start, work: Path, log: list[str],
           state=lambda: "") -> Driver:
    """``_wait``; a driver that died of Spark's own Python-worker plumbing
    (``WORKER_PLUMBING``) is started again (logged), within ``STARTUP_RESTARTS``. Returns
    the driver running now (one that fails the wait is killed before it raises)."""
    for attempt in range(STARTUP_RESTARTS + 1):
        try:
            _wait(predicate, what, driver, work, state)
            return driver
        except AssertionError:
            if driver.alive() or attempt == STARTUP_RESTARTS or \
                    WORKER_PLUMBING not in driver.output():
                driver.kill()
                raise
        driver.kill()
        log.append("driver died of Spark's Python-worker plumbing (a worker did not connect "
                   "back within Spark's fixed 10 s); started again")
        driver = start()
    raise AssertionError("unreachable")


def run_with_kills(master: str, server: LurcherServer, stream: str, work: Path,
                   env: dict[str, str], kills: int, seed: int,
                   exactly_once: bool = True) -> Outcome:
    """(``exactly_once=False`` runs the sink at-least-once: the check that the kills do
    cause replays that would duplicate messages.)"""
    rng = random.Random(seed)
    checkpoint = work / "checkpoint"
    outcome = Outcome({}, {}, {})
    with SyncClient.from_connection_string(f"iggy://iggy:iggy@{server.tcp_address}") as client:
        client.create_stream(stream)
        for topic in ("A", "B"):
            client.create_topic(stream, topic, partitions_count=PARTITIONS)
        _produce(client, stream, 0, FIRST)
        per_partition = FIRST

        def start() -> Driver:
            return _started_driver(master, server, stream, work, env, exactly_once,
                                   outcome.log)

        for kill in range(kills + 1):
            before = _stored(client, stream, "B")
            driver = start()
            try:
                if kill == kills:
                    total = per_partition * PARTITIONS
                    driver = _until(lambda: _stored(client, stream, "B") >= total and
                                    _last_batch(checkpoint, "commits") >= _last_batch(
                                        checkpoint, "offsets"),
                                    f"{total} messages in B", driver, start, work, outcome.log,
                                    lambda: f"B has {_stored(client, stream, 'B')}")
                    time.sleep(2.0)  # later (empty) triggers must add nothing
                    break
                driver = _until(lambda: _stored(client, stream, "B") > before, "progress",
                                driver, start, work, outcome.log)
                time.sleep(rng.uniform(0.0, 1.5))
            finally:
                driver.kill()
            planned = _last_batch(checkpoint, "offsets")
            done = _last_batch(checkpoint, "commits")
            outcome.replays += planned > done
            outcome.kills += 1
            outcome.log.append(f"kill {kill}: B had {_stored(client, stream, 'B')}, "
                               f"batch {planned} planned, {done} committed")
            _produce(client, stream, per_partition, MORE)
            per_partition += MORE
        for p in range(PARTITIONS):
            polled = client.poll_messages(stream, "B", p, "first", per_partition * 2 + 10)
            outcome.sink[p] = [bytes(m.payload) for m in polled.messages()]
            outcome.expected[p] = transformed(p, per_partition)
            info = client.get_consumer_offset(CONSUMER, stream, "A", p)
            outcome.committed[p] = None if info is None else info.stored_offset
        outcome.expected_committed = expected_commits(checkpoint)
    return outcome


def describe(outcome: Outcome) -> str:
    counts = {p: len(v) for p, v in outcome.sink.items()}
    return json.dumps({"sink": counts, "expected": {p: len(v) for p, v in
                                                    outcome.expected.items()},
                       "replays": outcome.replays, "log": outcome.log})
