"""The simulator's linearizability check for the append-log model."""

from __future__ import annotations

from lurcher.core.replication.sim.model import AppendLog, Completed, check_linearizable


def _op(value: bytes, invoke: int, complete: int, pos: int, prev: bytes) -> Completed:
    return Completed(value, invoke, complete, pos.to_bytes(8, "little") + prev)


def test_append_log_returns_position_and_predecessor() -> None:
    log = AppendLog()
    assert log.apply(b"a") == (1).to_bytes(8, "little")
    assert log.apply(b"b") == (2).to_bytes(8, "little") + b"a"


def test_sequential_and_concurrent_histories_are_linearizable() -> None:
    assert check_linearizable([_op(b"a", 0, 5, 1, b""), _op(b"b", 6, 9, 2, b"a")]) is None
    assert check_linearizable([_op(b"b", 0, 9, 1, b""), _op(b"a", 1, 5, 2, b"b")]) is None


def test_real_time_order_violation_is_found() -> None:
    problem = check_linearizable([_op(b"a", 0, 5, 2, b"b"), _op(b"b", 6, 9, 1, b"")])
    assert problem and "invoked after" in problem


def test_duplicate_position_and_wrong_predecessor_are_found() -> None:
    assert "two appends" in check_linearizable([_op(b"a", 0, 1, 1, b""), _op(b"b", 0, 1, 1, b"")])
    assert "predecessor" in check_linearizable([_op(b"a", 0, 1, 1, b""), _op(b"b", 2, 3, 2, b"x")])
