"""The file journal carries out storage intents, survives a torn tail and discards safely."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lurcher.cluster import journal_file
from lurcher.cluster.journal_file import FileJournal, replace_whole
from lurcher.core.replication.journal import Discard, Read, Sync, Write


def test_writes_sync_and_read_back(tmp_path: Path) -> None:
    j = FileJournal(tmp_path / "g.journal")
    done = j.execute([Write(0, b"a"), Write(1, b"bb"), Sync(2), Read()])
    assert done == [("written", 0), ("written", 1), ("synced", 2), ("loaded", ([b"a", b"bb"], 0))]
    j.close()
    again = FileJournal(tmp_path / "g.journal")
    assert again.execute([Read()]) == [("loaded", ([b"a", b"bb"], 0))]


def test_a_write_below_the_end_drops_what_follows(tmp_path: Path) -> None:
    j = FileJournal(tmp_path / "g.journal")
    j.execute([Write(0, b"a"), Write(1, b"b"), Write(2, b"c"), Write(1, b"B")])
    assert j.read() == ([b"a", b"B"], 0)


def test_a_torn_last_frame_is_cut_off(tmp_path: Path) -> None:
    path = tmp_path / "g.journal"
    j = FileJournal(path)
    j.execute([Write(0, b"first"), Write(1, b"second")])
    j.close()
    path.write_bytes(path.read_bytes()[:-3])
    j = FileJournal(path)
    assert j.read() == ([b"first"], 0)
    j.execute([Write(1, b"again")])
    assert j.read() == ([b"first", b"again"], 0)


def test_discard_keeps_positions_and_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "g.journal"
    j = FileJournal(path)
    j.execute([Write(i, bytes([65 + i])) for i in range(5)] + [Discard(3)])
    assert j.read() == ([b"D", b"E"], 3)
    j.execute([Write(5, b"F")])
    j.close()
    assert FileJournal(path).read() == ([b"D", b"E", b"F"], 3)
    assert not path.with_suffix(".tmp").exists()


def test_a_new_journal_starts_with_the_given_first_record_an_old_one_keeps_its_own(
        tmp_path: Path) -> None:
    path = tmp_path / "g.journal"
    assert FileJournal(path, b"format").read() == ([b"format"], 0)
    assert FileJournal(path, b"other").read() == ([b"format"], 0)
    assert FileJournal(tmp_path / "lost.journal").read() == ([], 0)


def test_writes_after_a_discard_continue_and_truncate_the_kept_records(tmp_path: Path) -> None:
    path = tmp_path / "g.journal"
    j = FileJournal(path)
    j.execute([Write(i, [b"r", bytes([65 + i]) * (i + 1)]) for i in range(5)] + [Discard(2)])
    j.execute([Write(4, b"X"), Write(5, [b"Y", b"Z"])])  # replaces record 4, then appends
    j.close()
    assert FileJournal(path).read() == ([b"rCCC", b"rDDDD", b"X", b"YZ"], 2)


def test_creation_discard_and_replace_whole_fsync_the_directory_the_one_shared_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The journal's directory fsyncs are the storage layer's (``io.sync_directory``: one
    copy of "fsync a directory" in the process), each of the file's own directory."""
    synced: list[Path] = []
    monkeypatch.setattr(journal_file, "sync_directory", synced.append)
    j = FileJournal(tmp_path / "g.journal")
    j.execute([Write(0, b"a"), Write(1, b"b"), Discard(1)])
    j.close()
    replace_whole(tmp_path / "count", b"1")
    assert synced == [tmp_path] * 3
    assert (tmp_path / "count").read_bytes() == b"1"


def test_a_failed_directory_fsync_raises_and_the_new_content_is_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As before: replace_whole raises the directory fsync's OSError after the rename."""
    def refuse(path: os.PathLike[str]) -> None:
        raise OSError(5, "injected")

    monkeypatch.setattr(journal_file, "sync_directory", refuse)
    with pytest.raises(OSError):
        replace_whole(tmp_path / "count", b"2")
    assert (tmp_path / "count").read_bytes() == b"2"
    assert not (tmp_path / "count.tmp").exists()
