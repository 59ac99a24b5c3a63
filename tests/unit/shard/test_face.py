"""Handlers reach the shard only through ``ShardFace``, and ``Shard`` has all of it."""

from __future__ import annotations

import re
from pathlib import Path

import lurcher.core.shard.handlers as handlers_package
from lurcher.core.shard import placement
from lurcher.core.shard.face import ShardFace
from tests.unit.shard.harness import ShardHarness

USE = re.compile(r"(?<![\w.])shard\.(\w+)")


def face_members() -> set[str]:
    return {name for name in dir(ShardFace) if not name.startswith("_")} | set(
        ShardFace.__annotations__)


def test_handlers_use_only_the_face() -> None:
    sources = [*Path(handlers_package.__path__[0]).glob("*.py"), Path(placement.__file__)]
    used = {name for path in sources for name in USE.findall(path.read_text())}
    assert used and used <= face_members(), sorted(used - face_members())


def test_a_real_shard_has_every_member_of_the_face(harness: ShardHarness) -> None:
    missing = [name for name in face_members() if not hasattr(harness.shard, name)]
    assert missing == []
