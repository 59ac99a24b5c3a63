"""Drives one replica by hand: instant storage, effects collected per step."""

from __future__ import annotations

from lurcher.core.replication.journal import Format, Sync, ViewState, Write, encode_record
from lurcher.core.replication.messages import DoViewChange, StartViewChange
from lurcher.core.replication.replica import Config, Effects, Replica
from lurcher.core.replication.sim.model import AppendLog


def merge(into: Effects, fx: Effects) -> Effects:
    for name in ("sends", "replies", "storage", "committed", "executed", "restored"):
        getattr(into, name).extend(getattr(fx, name))
    return into


def settle(replica: Replica, fx: Effects) -> Effects:
    """Complete every storage intent in ``fx`` (and those it causes); all effects merged."""
    total = Effects()
    queue = [fx]
    while queue:
        step = queue.pop(0)
        merge(total, step)
        for intent in step.storage:
            if isinstance(intent, Write):
                queue.append(replica.on_written(intent.pos))
            elif isinstance(intent, Sync):
                queue.append(replica.on_synced(intent.upto))
    return total


def make(index: int, n: int = 3, view: int | None = None, **config: int) -> Replica:
    """A replica loaded from a formatted journal (optionally in ``view``)."""
    replica = Replica(index, Config(replicas=n, **config), AppendLog(), nonce=1000 + index)
    replica.start()
    records = [encode_record(Format(n))]
    if view is not None:
        records.append(encode_record(ViewState(view, view)))
    settle(replica, replica.on_loaded(records))
    return replica


def make_primary(n: int = 3, **config: int) -> Replica:
    """Replica 1 as the primary of view 1, reached through a real view change.

    ``max_batch`` defaults to 1 here, so each request is prepared at once.
    """
    replica = make(1, n, **{"max_batch": 1, **config})
    settle(replica, replica.on_message(StartViewChange(1, 0)))
    for other in (0, 2, 3)[: n // 2]:
        settle(replica, replica.on_message(StartViewChange(1, other)))
        fx = settle(replica, replica.on_message(DoViewChange(1, 0, 0, (), other)))
    assert replica.is_primary and replica.status.value == "normal"
    return replica


def sent(fx: Effects, kind: type) -> list[tuple[int, object]]:
    return [(to, m) for to, m in fx.sends if isinstance(m, kind)]
