from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.shard.harness import ShardHarness


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[ShardHarness]:
    shard = ShardHarness(tmp_path)
    try:
        yield shard
    finally:
        shard.close()
