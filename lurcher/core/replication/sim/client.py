"""A simulated client: one outstanding request at a time, retried to every replica.

The first send goes to the replica it believes is primary; on timeout the same request
(same number) goes to all replicas, which is what exercises the client table.
"""

from __future__ import annotations

import random
from typing import Callable

from lurcher.core.replication.messages import Reply, Request
from lurcher.core.replication.sim.model import Completed


class SimClient:
    def __init__(self, client_id: int, replicas: int, total: int, timeout: int, think: int,
                 rng: random.Random) -> None:
        self.id, self.replicas, self.total, self.timeout, self.think, self.rng = (
            client_id, replicas, total, timeout, think, rng)
        self.request_no = 0
        self.view = 0
        self.current: Request | None = None
        self.invoked = self.last_sent = 0
        self.next_start = rng.randint(0, 20)
        self.history: list[Completed] = []

    @property
    def done(self) -> bool:
        return len(self.history) >= self.total and self.current is None

    def tick(self, now: int, send: Callable[[int, Request], None]) -> None:
        if self.current is None:
            if len(self.history) < self.total and now >= self.next_start:
                self.request_no += 1
                body = b"%d:%d" % (self.id, self.request_no)
                self.current = Request(self.id, self.request_no, body)
                self.invoked = self.last_sent = now
                send(self.view % self.replicas, self.current)
        elif now - self.last_sent >= self.timeout:
            self.last_sent = now
            for r in range(self.replicas):
                send(r, self.current)

    def on_reply(self, now: int, reply: Reply) -> bool:
        """True if ``reply`` answers the outstanding request (the client accepts it)."""
        current = self.current
        if current is None or reply.request != current.request:
            return False
        self.history.append(Completed(current.body, self.invoked, now, reply.result))
        self.current = None
        self.view = max(self.view, reply.view)
        self.next_start = now + self.rng.randint(0, self.think)
        return True
