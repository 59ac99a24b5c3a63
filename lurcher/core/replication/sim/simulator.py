"""The deterministic simulator: one seed decides the cluster, the workload and every fault.

A run has a fault phase (network drop/duplicate/delay/reorder, symmetric and asymmetric
partitions, crashes that lose unsynced writes and may tear the last one, disk loss of at
most f replicas at a time, pauses, per-replica timer skew) and then heals: partitions
clear, paused replicas resume, crashed ones restart, drops stop. The auditor checks safety
after every step; liveness requires that, within ``liveness_ticks`` of healing, every client
finished its requests and every replica executed every committed op; finally the clients'
history must be linearizable. Each seed also picks a small checkpoint interval (or none) and
how many ops replicas keep below it, so lagging, restarted and recovering replicas often
need ops that others trimmed and get a checkpoint instead (``checkpoint_transfers``). Everything
random comes from one ``random.Random(seed)``, so a seed replays bit for bit; ``trace`` hashes
every delivered packet to prove it.
"""

from __future__ import annotations

import hashlib
import random
import traceback
from dataclasses import dataclass

import msgspec

from lurcher.core.replication.journal import Format, encode_record
from lurcher.core.replication.replica import Bug, Config, Effects, Replica, Status
from lurcher.core.replication.sim.auditor import Auditor, SafetyViolation
from lurcher.core.replication.sim.client import SimClient
from lurcher.core.replication.sim.disk import Disk
from lurcher.core.replication.sim.model import AppendLog, check_linearizable
from lurcher.core.replication.sim.network import Network

CLIENT_BASE = 100


class LivenessViolation(Exception):
    pass


@dataclass(frozen=True)
class Outcome:
    seed: int
    replicas: int
    ok: bool
    reason: str
    ticks: int
    trace: str
    checkpoint_transfers: int = 0

    def replay_command(self, bugs: frozenset[Bug] = frozenset()) -> str:
        flags = "".join(f" --bug {b.value}" for b in sorted(bugs, key=lambda b: b.value))
        return f"python -m lurcher.core.replication.sim --seed {self.seed}{flags}"


class Simulation:
    def __init__(self, seed: int, bugs: frozenset[Bug] = frozenset(),
                 host_inputs: bool = False) -> None:
        """``host_inputs``: also drive the inputs a host adds (``flush`` after a replica's
        step, ``request_view`` to a random higher view while faults run), from a second
        generator, so the seeds' runs without them stay as they were."""
        rng = self.rng = random.Random(seed)
        self.host_rng = random.Random(seed * 7919 + 1) if host_inputs else None
        self.seed, self.bugs = seed, bugs
        self.n = n = rng.choice((3, 5))
        self.f = (n - 1) // 2
        self.config = Config(replicas=n, max_batch=rng.choice((1, 2, 4)),
                             pipeline=rng.choice((1, 8, 32)),
                             checkpoint_every=rng.choice((0, 1, 2, 3, 5, 8)),
                             keep_below_checkpoint=rng.choice((0, 0, 1, 4)))
        self.fault_ticks = rng.randint(150, 350)
        self.liveness_ticks = 1500
        self.p_crash = rng.choice((0.003, 0.01, 0.02))
        self.p_power_loss = rng.choice((0.0005, 0.002))
        self.p_wipe = rng.choice((0.05, 0.2))
        self.p_partition = rng.choice((0.005, 0.01, 0.03))
        self.p_pause = rng.choice((0.002, 0.01))
        self.net = Network(rng, drop=rng.choice((0.005, 0.02, 0.1)),
                           duplicate=rng.choice((0.005, 0.02, 0.1)), max_delay=rng.randint(1, 6))
        latency = rng.randint(0, 4)
        fmt = [encode_record(Format(n))]
        self.disks = [Disk(rng, latency, fmt) for _ in range(n)]
        self.skew = [rng.uniform(0.75, 1.3) for _ in range(n)]
        self.clock = [0.0] * n
        self.replicas: list[Replica | None] = [None] * n
        self.paused_until = [0] * n
        self.held: list[list[tuple[int, object]]] = [[] for _ in range(n)]
        self.lost: set[int] = set()
        self.auditor = Auditor(n)
        total = rng.randint(5, 20)
        think = rng.randint(0, self.fault_ticks // total)
        self.clients = [SimClient(CLIENT_BASE + c, n, total, rng.randint(15, 40), think, rng)
                        for c in range(rng.randint(2, 5))]
        self.now = 0
        self.checkpoint_transfers = 0
        self.hash = hashlib.blake2b(digest_size=16)
        self.encode = msgspec.msgpack.encode

    # ---- running ------------------------------------------------------------------

    def run(self) -> Outcome:
        try:
            for r in range(self.n):
                self._boot(r)
            self._run()
            reason, ok = "ok", True
        except (SafetyViolation, LivenessViolation) as e:
            reason, ok = f"{type(e).__name__}: {e}", False
        except Exception as e:  # a replica crashed: report it as a failing seed
            frame = traceback.extract_tb(e.__traceback__)[-1]
            reason, ok = f"{type(e).__name__}: {e} at {frame.filename}:{frame.lineno}", False
        return Outcome(self.seed, self.n, ok, reason, self.now, self.hash.hexdigest(),
                       self.checkpoint_transfers)

    def _run(self) -> None:
        deadline = self.fault_ticks + self.liveness_ticks
        while True:
            self.now += 1
            if self.now < self.fault_ticks:
                self._inject_faults()
            elif self.now == self.fault_ticks:
                self._heal()
            elif self._converged():
                break
            elif self.now > deadline:
                raise LivenessViolation(self._stuck())
            self._step()
        problem = check_linearizable([c for cl in self.clients for c in cl.history])
        if problem:
            raise SafetyViolation(f"not linearizable: {problem}")

    def _step(self) -> None:
        now = self.now
        for src, dst, msg in self.net.due(now):
            self._deliver(src, dst, msg)
        for r in range(self.n):
            replica = self.replicas[r]
            if replica is None or self.paused_until[r] > now:
                continue
            for kind, arg in self.disks[r].due(now):
                if kind == "written":
                    self._effects(r, replica.on_written(arg))
                elif kind == "synced":
                    self._effects(r, replica.on_synced(arg))
                else:
                    self._effects(r, replica.on_loaded(*arg))
            self.clock[r] += self.skew[r]
            while self.clock[r] >= 1.0:
                self.clock[r] -= 1.0
                self._effects(r, replica.on_tick())
            if self.host_rng is not None:
                self._host_inputs(r, replica)
            if r in self.lost and replica.status is Status.NORMAL:
                self.lost.discard(r)
        for client in self.clients:
            client.tick(now, self._client_send)

    def _host_inputs(self, r: int, replica: Replica) -> None:
        rng = self.host_rng
        if rng.random() < 0.3:
            self._effects(r, replica.flush())
        if self.now < self.fault_ticks and rng.random() < 0.003:
            self._effects(r, replica.request_view(replica.view + rng.randint(1, self.n)))

    def _deliver(self, src: int, dst: int, msg: object) -> None:
        self.hash.update(self.encode((self.now, src, dst)))
        self.hash.update(self.encode(msg))
        if dst >= CLIENT_BASE:
            client = self.clients[dst - CLIENT_BASE]
            if client.on_reply(self.now, msg):
                self.auditor.on_reply(msg)
            return
        replica = self.replicas[dst]
        if replica is None:
            return
        if self.paused_until[dst] > self.now:
            self.held[dst].append((src, msg))
            return
        self._effects(dst, replica.on_message(msg))

    def _effects(self, r: int, fx: Effects) -> None:
        now, net = self.now, self.net
        for to, msg in fx.sends:
            net.send(now, r, to, msg)
        for reply in fx.replies:
            net.send(now, r, reply.client, reply)
        disk = self.disks[r]
        for intent in fx.storage:
            disk.submit(now, intent)
        audit = self.auditor
        for checkpoint, transferred in fx.restored:
            self.checkpoint_transfers += transferred
            audit.on_restored(r, checkpoint, AppendLog.from_snapshot(checkpoint.state).values)
        for entry in fx.committed:
            audit.on_committed(r, entry)
        for op, client, request, result in fx.executed:
            audit.on_executed(r, op, client, request, result)

    def _client_send(self, to: int, msg: object) -> None:
        self.net.send(self.now, msg.client, to, msg)

    # ---- faults -------------------------------------------------------------------

    def _boot(self, r: int) -> None:
        replica = Replica(r, self.config, AppendLog(), self.rng.getrandbits(63), self.bugs)
        self.replicas[r] = replica
        self.auditor.restarted(r)
        self.clock[r] = 0.0
        self._effects(r, replica.start())

    def _crash(self, r: int, wipe: bool) -> None:
        self.replicas[r] = None
        self.held[r].clear()
        self.paused_until[r] = 0
        if wipe:
            self.disks[r].wipe()
            self.lost.add(r)
        else:
            self.disks[r].crash()

    def _inject_faults(self) -> None:
        rng, n = self.rng, self.n
        if rng.random() < self.p_crash:
            r = rng.randrange(n)
            if self.replicas[r] is not None:
                wipe = rng.random() < self.p_wipe and len(self.lost) < self.f and r not in self.lost
                self._crash(r, wipe)
        if rng.random() < self.p_power_loss:
            for r in range(n):
                if self.replicas[r] is not None:
                    self._crash(r, wipe=False)
        for r in range(n):
            if self.replicas[r] is None and rng.random() < 0.05:
                self._boot(r)
        if rng.random() < self.p_partition:
            if self.net.blocked and rng.random() < 0.5:
                self.net.heal()
            else:
                side = {r for r in range(n) if rng.random() < 0.5}
                self.net.partition((side, set(range(n)) - side), symmetric=rng.random() < 0.5)
        if rng.random() < self.p_pause:
            r = rng.randrange(n)
            self.paused_until[r] = self.now + rng.randint(5, 60)
        self._resume_paused()

    def _resume_paused(self) -> None:
        for r in range(self.n):
            if self.held[r] and self.paused_until[r] <= self.now:
                for src, msg in self.held[r]:
                    self.net.redeliver(self.now, src, r, msg)
                self.held[r].clear()

    def _heal(self) -> None:
        self.net.heal()
        self.net.drop = self.net.duplicate = 0.0
        for r in range(self.n):
            self.paused_until[r] = 0
            if self.replicas[r] is None:
                self._boot(r)
        self._resume_paused()

    # ---- liveness -----------------------------------------------------------------

    def _converged(self) -> bool:
        if not all(c.done for c in self.clients):
            return False
        top = self.auditor.top
        return all(a >= top for a in self.auditor.applied)

    def _stuck(self) -> str:
        waiting = [c.id for c in self.clients if not c.done]
        states = [f"{r.index}:{r.status.value}/v{r.view}/lv{r.log_view}/op{r.op}/c{r.commit}"
                  for r in self.replicas if r is not None]
        return (f"not converged {self.liveness_ticks} ticks after healing: clients waiting "
                f"{waiting}, committed {self.auditor.top}, replicas {states}")


def run_seed(seed: int, bugs: frozenset[Bug] = frozenset(),
             host_inputs: bool = False) -> Outcome:
    return Simulation(seed, bugs, host_inputs).run()
