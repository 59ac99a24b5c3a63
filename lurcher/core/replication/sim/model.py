"""The replicated object the simulator drives, and its linearizability check.

``AppendLog`` is an append-only register log: ``apply(value)`` appends and returns the new
position (u64 LE) followed by the previous last value. Because every result names its
position and predecessor, a client-visible history is linearizable exactly when positions
are distinct, each known predecessor is the value at the position before, and an append
that completed before another was invoked has the smaller position.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec


class AppendLog:
    def __init__(self) -> None:
        self.values: list[bytes] = []

    def apply(self, body: bytes) -> bytes:
        prev = self.values[-1] if self.values else b""
        self.values.append(body)
        return len(self.values).to_bytes(8, "little") + prev

    def snapshot(self) -> bytes:
        return msgspec.msgpack.encode(self.values)

    def restore(self, state: bytes) -> None:
        self.values = list(msgspec.msgpack.decode(state, type=list[bytes]))

    @classmethod
    def from_snapshot(cls, state: bytes) -> "AppendLog":
        model = cls()
        model.restore(state)
        return model


@dataclass(frozen=True)
class Completed:
    """One client operation: invoked at tick ``invoke``, answered at ``complete``."""

    value: bytes
    invoke: int
    complete: int
    result: bytes


def check_linearizable(history: list[Completed]) -> str | None:
    """None if ``history`` is linearizable for ``AppendLog``, else why not."""
    by_pos: dict[int, Completed] = {}
    for op in history:
        pos = int.from_bytes(op.result[:8], "little")
        if pos in by_pos:
            return f"position {pos} returned to two appends"
        by_pos[pos] = op
    for pos, op in by_pos.items():
        before = by_pos.get(pos - 1)
        prev = op.result[8:]
        if pos == 1 and prev != b"":
            return "first append saw a predecessor"
        if before is not None and before.value != prev:
            return f"append at {pos} saw predecessor {prev!r}, not {before.value!r}"
    earliest_later_complete: int | None = None
    for pos in sorted(by_pos, reverse=True):
        op = by_pos[pos]
        if earliest_later_complete is not None and earliest_later_complete < op.invoke:
            return f"append at {pos} was invoked after a later-positioned append completed"
        if earliest_later_complete is None or op.complete < earliest_later_complete:
            earliest_later_complete = op.complete
    return None
