"""The metadata log's reserve on a really full file system (a small tmpfs, mounted here).

With the disk full, records that create things are refused once they would reach into the
half of the reserve kept for deletions; deletions are still written, so an operator can
free the disk over the API; everything accepted survives a reopen; with space back,
creations are accepted again.
"""

from __future__ import annotations

import pytest

from lurcher.core.meta import events as ev
from lurcher.core.meta.store import RESERVE_BYTES, MetaStore
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from tests.support import tmpfs


def create_until_refused(store: MetaStore, limit: int = 10_000) -> list[int]:
    created = []
    for i in range(limit):
        sid = store.state.stream_ids.peek()
        try:
            store.record(ev.StreamCreated(sid, f"stream-{i}", i))
        except IggyError as exc:
            assert exc.code == ErrorCode.CANNOT_WRITE_TO_FILE
            return created
        created.append(sid)
    pytest.fail(f"{limit} creations accepted on a full disk")


def test_full_disk_keeps_room_for_deletions(tmp_path):
    with tmpfs.mounted(tmp_path / "disk", "1m") as disk:
        store = MetaStore(disk / "log")
        tmpfs.fill_up(disk)
        created = create_until_refused(store)
        assert len(created) > 10
        assert (disk / "log").stat().st_size <= RESERVE_BYTES // 2
        for sid in created:  # every deletion is accepted although the disk is full
            store.record(ev.StreamDeleted(sid))
        store.close()
        reopened = MetaStore(disk / "log")
        assert reopened.events_count == 2 * len(created) and reopened.state.streams == {}
        (disk / "filler").unlink()
        reopened.record(ev.StreamCreated(0, "after", 1))
        assert MetaStore(disk / "log").state.stream_names == {"after": 0}
