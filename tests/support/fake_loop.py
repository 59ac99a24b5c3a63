"""``FakeLoop``: the ``call_soon`` and clock of an event loop, driven turn by turn by a test
(no real loop, no real time)."""

from __future__ import annotations

from collections.abc import Callable


class FakeLoop:
    def __init__(self) -> None:
        self.now = 0.0  # seconds
        self.ready: list[Callable[[], object]] = []

    def call_soon(self, callback: Callable[[], object]) -> None:
        self.ready.append(callback)

    def clock(self) -> float:
        return self.now

    def run_turn(self, step_s: float) -> None:
        """One loop turn: the callbacks ready now run, then ``step_s`` passes."""
        ready, self.ready = self.ready, []
        for callback in ready:
            callback()
        self.now += step_s
