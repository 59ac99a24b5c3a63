"""A partition's replicated purge count (``cluster-purges``) is replaced whole: a write that
fails part-way (here a file size limit, as a full disk or quota refuses it) leaves the
previous count for the next start to read, never a damaged file (an empty one made every
op of the partition's group raise ValueError on the node, tearing down its links). A purge
a crash interrupted (its pending count, ``cluster-purges.pending``, above the count) is
finished by the first read of the count after the start."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lurcher.cluster.partition_service import PENDING_PURGES_FILE, PURGES_FILE, purge, \
    purges_of

PURGE_AGAIN = """
import sys
from lurcher.cluster.partition_service import purge
from tests.unit.cluster.test_purge_count import Emptied
purge(Emptied(sys.argv[1]), 2)
"""


class Emptied:
    """A partition whose purge empties it (nothing to do here: only its count matters)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.purges = 0  # how many times it was emptied

    def purge(self) -> None:
        self.purges += 1


def no_file_growth() -> None:
    """In the child: no file may grow past 0 bytes (EFBIG instead of SIGXFSZ)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


def test_a_purge_count_that_cannot_be_written_leaves_the_previous_one(tmp_path: Path) -> None:
    purge(Emptied(str(tmp_path)), 1)
    refused = subprocess.run([sys.executable, "-c", PURGE_AGAIN, str(tmp_path)],
                             capture_output=True, text=True, preexec_fn=no_file_growth,
                             timeout=60)
    assert refused.returncode != 0 and "OSError" in refused.stderr, refused.stderr
    assert (tmp_path / PURGES_FILE).read_text() == "1"  # "" on the old code
    assert purges_of(Emptied(str(tmp_path))) == 1  # as the next start reads it
    assert sorted(p.name for p in tmp_path.iterdir()) == [PURGES_FILE]


@pytest.mark.parametrize("pending, emptied, count", [(2, 1, 2), (1, 0, 1)])
def test_a_start_finishes_a_purge_a_crash_interrupted(tmp_path: Path, pending: int,
                                                      emptied: int, count: int) -> None:
    """Pending 2 over a count of 1: killed before the count was recorded (emptied or not);
    pending 1: killed after recording it (the old code read 1 for both and never emptied)."""
    (tmp_path / PURGES_FILE).write_text("1")
    (tmp_path / PENDING_PURGES_FILE).write_text(str(pending))
    partition = Emptied(str(tmp_path))
    assert purges_of(partition) == count
    assert partition.purges == emptied
    assert sorted(p.name for p in tmp_path.iterdir()) == [PURGES_FILE]
    assert (tmp_path / PURGES_FILE).read_text() == str(count)
