"""Tombstones of deletions: names, settling at start against the metadata log, the sweep."""

from __future__ import annotations

from pathlib import Path

import pytest

from lurcher.core.meta import events as ev
from lurcher.core.meta.store import MetaStore
from lurcher.core.shard.tombstones import Graveyard, Tombstone, entity_path, tombstones_for


@pytest.mark.parametrize("stone", [Tombstone(7, "stream", (3,)), Tombstone(0, "topic", (1, 2)),
                                   Tombstone(12, "partition", (1, 2, 30))])
def test_name_round_trip(stone):
    assert Tombstone.parse(stone.name) == stone


@pytest.mark.parametrize("name", ["x-stream-1", "1-stream", "1-topic-1", "1-volume-1", "1-stream-a",
                                  "1-stream-١", "١-stream-1"])
def test_foreign_names_do_not_parse(name):
    assert Tombstone.parse(name) is None


def populated(tmp_path: Path) -> MetaStore:
    store = MetaStore(tmp_path / "state" / "log")
    store.record(ev.StreamCreated(0, "s", 1))
    store.record(ev.TopicCreated(0, 0, "t", 1, 3, 1, 0, 0, 1))
    for pid in range(3):
        segment = entity_path(tmp_path, 0, 0, pid) / "00000000000000000000.log"
        segment.parent.mkdir(parents=True)
        segment.write_bytes(b"old")
    return store


def test_committed_deletion_is_finished(tmp_path):
    store = populated(tmp_path)
    graveyard = Graveyard(tmp_path)
    event = ev.PartitionsDeleted(0, 0, 2)
    graveyard.bury(tombstones_for(store.events_count, event, store.state))
    store.record(event)
    graveyard.settle(store.event_at)
    assert list(graveyard.root.iterdir()) == []
    assert sorted(p.name for p in entity_path(tmp_path, 0, 0).joinpath("partitions").iterdir()) == ["0"]


def test_unrecorded_deletion_is_rolled_back(tmp_path):
    store = populated(tmp_path)
    graveyard = Graveyard(tmp_path)
    graveyard.bury(tombstones_for(store.events_count, ev.StreamDeleted(0), store.state))
    assert not entity_path(tmp_path, 0).exists()
    store.record(ev.StreamCreated(1, "other", 2))  # a different event took the position
    graveyard.settle(store.event_at)
    assert (entity_path(tmp_path, 0, 0, 2) / "00000000000000000000.log").read_bytes() == b"old"
    assert list(graveyard.root.iterdir()) == []


def test_sweep_removes_only_unknown_directories(tmp_path):
    store = populated(tmp_path)
    for ids in ((0, 0, 3), (0, 1, 0), (4, 0, 0)):
        entity_path(tmp_path, *ids).mkdir(parents=True)
    Graveyard(tmp_path).sweep(store.state)
    found = {p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("streams/*/topics/*/partitions/*")}
    assert found == {f"streams/0/topics/0/partitions/{p}" for p in range(3)}
    assert not entity_path(tmp_path, 4).exists() and not entity_path(tmp_path, 0, 1).exists()


def test_sweep_moves_unknown_directories_aside_with_their_messages(tmp_path, caplog):
    """The sweep deleted them: a topic whose metadata record was lost (a damaged last record
    of the metadata log is cut as torn) lost its stored messages at the next start."""
    store = populated(tmp_path)
    lost = entity_path(tmp_path, 7)
    segment = lost / "topics" / "0" / "partitions" / "0" / "00000000000000000000.log"
    segment.parent.mkdir(parents=True)
    segment.write_bytes(b"acknowledged")
    Graveyard(tmp_path).sweep(store.state)
    assert not lost.exists()
    [kept] = (tmp_path / "orphans").iterdir()
    assert kept.name.startswith("7-")
    assert (kept / "topics/0/partitions/0/00000000000000000000.log").read_bytes() == b"acknowledged"
    assert f"moved orphan directory {lost} (unknown to the metadata) to {kept}" in caplog.text


def test_an_orphan_that_cannot_be_moved_stops_the_start(tmp_path):
    store = populated(tmp_path)
    entity_path(tmp_path, 4).mkdir(parents=True)
    (tmp_path / "orphans").write_bytes(b"")  # a file where the directory goes
    with pytest.raises(OSError, match=f"cannot move {entity_path(tmp_path, 4)}, a directory "
                                      "the metadata does not know"):
        Graveyard(tmp_path).sweep(store.state)
    assert entity_path(tmp_path, 4).is_dir()


def test_sweep_leaves_directories_not_named_in_ascii_digits(tmp_path):
    """'١٢٣' (Arabic-Indic digits) passed str.isdigit and int() read it as 123, a stream
    the metadata does not know: the sweep removed a directory the server never made."""
    store = populated(tmp_path)
    foreign = [tmp_path / "streams" / "١٢٣", tmp_path / "streams" / "0" / "topics" / "٧"]
    for path in foreign:
        path.mkdir(parents=True)
    Graveyard(tmp_path).sweep(store.state)
    assert all(path.is_dir() for path in foreign)
