"""``lurcher.runtime.heap``: startup's objects leave the collected generations; garbage made
before the freeze is collected, not frozen; objects made after it are collected as before."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from lurcher.runtime.heap import freeze_startup_objects


class Node:
    def __init__(self) -> None:
        self.peer: Node | None = None


def cycle() -> Node:
    a, b = Node(), Node()
    a.peer, b.peer = b, a
    return a


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()


def tracked(obj: object) -> bool:
    return any(o is obj for o in gc.get_objects())


def test_objects_alive_at_start_leave_every_collected_generation():
    kept = cycle()
    assert tracked(kept)
    frozen = freeze_startup_objects()
    assert frozen == gc.get_freeze_count() > 0
    assert not tracked(kept)  # get_objects lists the collected generations only


def test_garbage_from_before_the_freeze_is_freed_not_frozen():
    gone = weakref.ref(cycle())
    freeze_startup_objects()
    assert gone() is None


def test_objects_made_after_the_freeze_are_collected_as_before():
    freeze_startup_objects()
    later = weakref.ref(cycle())
    assert later() is not None
    gc.collect()
    assert later() is None
