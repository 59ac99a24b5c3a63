"""The auditor: checks safety after every step of a simulation.

- every replica executes ops 1, 2, ... in order, and an op, once executed anywhere (that
  is, committed), has the same entry everywhere, forever (never lost, changed, reordered);
- a replica executes each client request at most once, and every replica that executes it
  does so at the same op with the same result;
- every reply a client accepts is the result of an executed (committed) request;
- a checkpoint a replica restores (from its journal or from another replica) is of a
  committed op, its client table is exactly the latest execution of every client up to
  that op, and the restored state holds exactly the values appended up to that op.
"""

from __future__ import annotations

from lurcher.core.replication.messages import Checkpoint, Entry, Reply


class SafetyViolation(Exception):
    pass


class Auditor:
    def __init__(self, replicas: int) -> None:
        self.committed: dict[int, Entry] = {}
        self.applied = [0] * replicas
        self.executions: dict[tuple[int, int], tuple[int, bytes]] = {}
        self.executed_by: list[set[tuple[int, int]]] = [set() for _ in range(replicas)]

    def restarted(self, replica: int) -> None:
        self.applied[replica] = 0
        self.executed_by[replica] = set()

    @property
    def top(self) -> int:
        return len(self.committed)

    def on_committed(self, replica: int, entry: Entry) -> None:
        if entry.op != self.applied[replica] + 1:
            raise SafetyViolation(
                f"replica {replica} executed op {entry.op} after op {self.applied[replica]}")
        self.applied[replica] = entry.op
        known = self.committed.setdefault(entry.op, entry)
        if known != entry:
            raise SafetyViolation(
                f"replica {replica} executed op {entry.op} as {entry!r}, committed as {known!r}")

    def on_restored(self, replica: int, checkpoint: Checkpoint, values: list[bytes]) -> None:
        op = checkpoint.op
        if op > self.top:
            raise SafetyViolation(f"replica {replica} restored a checkpoint at op {op}, "
                                  f"above the committed op {self.top}")
        table: dict[int, tuple[int, bytes]] = {}
        appended: dict[int, bytes] = {}
        for (client, request), (at, result) in self.executions.items():
            if at <= op:
                if request > table.get(client, (-1, b""))[0]:
                    table[client] = (request, result)
                appended[int.from_bytes(result[:8], "little")] = self._body(at, client, request)
        got = {s.client: (s.request, s.result) for s in checkpoint.table}
        if got != table:
            raise SafetyViolation(f"replica {replica} restored a checkpoint at op {op} whose "
                                  f"client table {sorted(got)} differs from {sorted(table)}")
        if values != [appended[pos] for pos in sorted(appended)]:
            raise SafetyViolation(f"replica {replica} restored the wrong state at op {op}")
        self.applied[replica] = op
        self.executed_by[replica] = {key for key, (at, _) in self.executions.items() if at <= op}

    def _body(self, op: int, client: int, request: int) -> bytes:
        return next(r.body for r in self.committed[op].requests
                    if (r.client, r.request) == (client, request))

    def on_executed(self, replica: int, op: int, client: int, request: int, result: bytes) -> None:
        key = (client, request)
        if key in self.executed_by[replica]:
            raise SafetyViolation(f"replica {replica} executed request {key} twice (op {op})")
        self.executed_by[replica].add(key)
        known = self.executions.setdefault(key, (op, result))
        if known != (op, result):
            raise SafetyViolation(
                f"request {key} executed at op {op} on replica {replica}, "
                f"at op {known[0]} elsewhere")

    def on_reply(self, reply: Reply) -> None:
        known = self.executions.get((reply.client, reply.request))
        if known is None:
            raise SafetyViolation(f"client {reply.client} got a reply for request "
                                  f"{reply.request}, which was never executed")
        if known[1] != reply.result:
            raise SafetyViolation(f"client {reply.client} request {reply.request}: reply "
                                  "differs from the executed result")
