"""IdSlab: 0-based ids, most recently freed reused first, replay reproduces the state."""

import pytest

from lurcher.core.meta.slab import IdSlab


def test_ids_start_at_zero_and_grow():
    slab = IdSlab()
    assert [slab.take() for _ in range(3)] == [0, 1, 2]


def test_most_recently_freed_is_reused_first():
    slab = IdSlab()
    for _ in range(4):
        slab.take()
    slab.free(1)
    slab.free(3)
    assert slab.take() == 3
    assert slab.take() == 1
    assert slab.take() == 4


def test_replay_with_explicit_ids_reproduces_allocation():
    live, replay = IdSlab(), IdSlab()
    log = []
    for op in ["take", "take", "take", "free:0", "free:2", "take", "take", "take"]:
        if op == "take":
            log.append(("take", live.take()))
        else:
            live.free(int(op[5:]))
            log.append(("free", int(op[5:])))
    for kind, value in log:
        replay.take(value) if kind == "take" else replay.free(value)
    assert replay.peek() == live.peek()


def test_taking_an_id_in_use_is_refused():
    slab = IdSlab()
    slab.take()
    with pytest.raises(ValueError):
        slab.take(0)
