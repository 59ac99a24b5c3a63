"""GetStats when ``/proc`` cannot be read (descriptors used up): the figures read from it
are 0, one warning says why, and the counts still answer (``handlers.system``)."""

from __future__ import annotations

import errno
import logging

import psutil
import pytest

from lurcher.core.wire.requests.streams.create_stream import CreateStream
from lurcher.core.wire.requests.system.get_stats import GetStats
from tests.unit.shard.harness import ShardHarness


def out_of_descriptors(*args, **kwargs):
    raise OSError(errno.EMFILE, "Too many open files (injected)", "/proc/meminfo")


async def test_stats_answer_with_zero_host_figures_when_proc_cannot_be_read(
        harness: ShardHarness, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    root = await harness.login()
    await harness.call(root, CreateStream("orders"))
    monkeypatch.setattr(psutil, "virtual_memory", out_of_descriptors)
    with caplog.at_level(logging.WARNING):
        stats = await harness.call(root, GetStats())
    assert (stats.streams_count, stats.total_memory_bytes, stats.memory_usage_bytes) == (1, 0, 0)
    assert "figures cannot be read now" in caplog.text
