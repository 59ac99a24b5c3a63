"""MetaStore on a failing disk and over a damaged log.

Short writes are real: a child process records streams under a small ``RLIMIT_FSIZE``, so
the kernel writes part of a record and then refuses with EFBIG, as it does with ENOSPC on a
full disk. Every acknowledged record must survive a reopen, nothing refused may be applied,
and once the limit is lifted records are accepted (and kept) again. Replay: a damaged
record followed by a valid one stops the start (``MetaLogCorrupt``) instead of dropping the
rest; a damaged or zero-filled tail is still cut off.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import msgspec
import pytest

from lurcher.core.meta import events as ev
from lurcher.core.meta.store import RECORD_HEADER, MetaLogCorrupt, MetaStore
from lurcher.core.wire.error_codes import ErrorCode

REPO = Path(__file__).resolve().parents[3]

CHILD = r"""
import json, resource, signal, sys
from pathlib import Path
from lurcher.core.meta import events as ev
from lurcher.core.meta.store import MetaStore
from lurcher.core.wire.errors import IggyError

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
store = MetaStore(Path(sys.argv[1]))
hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), hard))
acked, refused = [], []

def create(name):
    try:
        store.record(ev.StreamCreated(store.state.stream_ids.peek(), name, 1))
        acked.append(name)
    except (IggyError, OSError) as exc:
        refused.append([name, getattr(exc, "status", None)])

for i in range(30):
    create(f"stream-{i}")
resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
create("after-space-freed")
print(json.dumps({"acked": acked, "refused": refused, "known": sorted(store.state.stream_names)}))
"""


def record_streams_under_limit(path: Path, limit: int) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), str(limit)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("limit", [301, 517])
def test_short_write_is_refused_and_nothing_acknowledged_is_lost(tmp_path, limit):
    log = tmp_path / "log"
    result = record_streams_under_limit(log, limit)
    assert result["acked"][-1] == "after-space-freed"
    assert len(result["acked"]) > 1 and result["refused"]
    reopened = MetaStore(log)
    assert sorted(reopened.state.stream_names) == sorted(result["acked"])
    assert reopened.events_count == len(result["acked"])
    assert result["known"] == sorted(result["acked"])  # nothing refused was applied
    assert all(status == ErrorCode.CANNOT_WRITE_TO_FILE for _, status in result["refused"])


def records(store_path: Path, count: int) -> list[int]:
    """Record ``count`` streams; the byte position where each record starts."""
    store = MetaStore(store_path)
    starts = []
    for i in range(count):
        starts.append(os.path.getsize(store_path))
        store.record(ev.StreamCreated(i, f"s{i}", i))
    store.close()
    return starts


def test_damaged_record_followed_by_valid_ones_refuses_to_start(tmp_path):
    log = tmp_path / "log"
    starts = records(log, 5)
    data = bytearray(log.read_bytes())
    data[starts[2] + RECORD_HEADER.size + 1] ^= 0xFF
    log.write_bytes(bytes(data))
    with pytest.raises(MetaLogCorrupt) as info:
        MetaStore(log)
    message = str(info.value)
    assert "\n" not in message and f"byte {starts[2]}" in message
    assert f"byte {starts[3]}" in message
    assert log.read_bytes() == bytes(data)  # nothing cut


def test_record_that_does_not_decode_refuses_to_start(tmp_path):
    log = tmp_path / "log"
    records(log, 2)
    body = msgspec.msgpack.encode({"type": "NoSuchEvent"})
    with open(log, "ab") as f:
        f.write(RECORD_HEADER.pack(len(body), zlib.crc32(body)) + body)
    with pytest.raises(MetaLogCorrupt):
        MetaStore(log)


def test_records_that_do_not_apply_refuse_to_start(tmp_path):
    """A log joined to a copy of itself (each record whole and valid) stopped the start
    with a ValueError traceback ('id 0 is in use')."""
    log = tmp_path / "log"
    records(log, 2)
    size = log.stat().st_size
    log.write_bytes(log.read_bytes() * 2)
    with pytest.raises(MetaLogCorrupt) as info:
        MetaStore(log)
    message = str(info.value)
    assert "\n" not in message and f"record at byte {size} (" in message
    assert "does not apply to the records before it (ValueError: id 0 is in use)" in message
    assert log.stat().st_size == 2 * size  # nothing cut

@pytest.mark.parametrize("tail", [b"\x00" * 4096, b"\x30\x00\x00\x00\x12\x34\x56\x78abc"])
def test_damaged_tail_alone_is_cut(tmp_path, tail):
    log = tmp_path / "log"
    records(log, 3)
    size = log.stat().st_size
    with open(log, "ab") as f:
        f.write(tail)
    reopened = MetaStore(log)
    assert reopened.events_count == 3 and log.stat().st_size == size
    reopened.record(ev.StreamCreated(3, "s3", 3))
    reopened.close()
    assert MetaStore(log).events_count == 4


def test_partial_record_is_cut_and_overwritten_by_the_next(tmp_path):
    log = tmp_path / "log"
    records(log, 2)
    size = log.stat().st_size
    with open(log, "ab") as f:  # what a killed write leaves: half a record
        f.write(RECORD_HEADER.pack(40, 0) + b"x" * 10)
    store = MetaStore(log)
    store.record(ev.StreamCreated(2, "s2", 2))
    assert MetaStore(log).events_count == 3 and log.stat().st_size > size
