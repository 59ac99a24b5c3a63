"""Crash-safe deletion of stream, topic and partition directories, and the start-up sweep.

A deletion first moves the directories it deletes into ``<system.path>/deleting/`` (a
rename: atomic, needs no free space), then writes its event to the metadata log, then
removes the moved directories (in a worker thread: nothing can reach them any more). If the
event cannot be written the directories are moved back and the command fails. A cluster
node applying a deletion its metadata group committed cannot refuse it: when its
directories cannot be moved aside, the event is written and they are removed in place.

A tombstone is named after the metadata-log position its delete event takes and what it
held: ``<seq>-stream-<s>``, ``<seq>-topic-<s>-<t>`` or ``<seq>-partition-<s>-<t>-<p>``.
At start, the metadata owner ``settle``s every tombstone before any partition opens: the
record at ``seq`` is that deletion -> the deletion was committed, finish it; otherwise the
process died before the event was written -> move the directory back. Then ``sweep``
moves every stream, topic or partition directory the metadata does not know (left by an
older version, a hand-made copy, or a metadata log whose last records were lost: a damaged
last record is cut at start as a torn one) to ``<system.path>/orphans/``, logging each one.
It never deletes them: such a directory may hold the only copy of acknowledged messages, and
the operator decides (put the metadata back, or delete them). A directory that cannot be
moved stops the start (OSError naming it).

``deleting/`` and ``orphans/`` must be on the file system of ``streams/`` (a rename cannot
cross file systems; a deletion that cannot move its directories fails and changes nothing).

Invariant after start: ``deleting/`` is empty and every numbered directory under
``streams/`` belongs to a stream, topic or partition of the metadata, so a re-used id
never opens a deleted entity's segments.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from lurcher.core.log.segment import number_in_name
from lurcher.core.meta import events as ev
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

log = logging.getLogger(__name__)

TOMBSTONE_DIR = "deleting"
ORPHANS_DIR = "orphans"
KINDS = {"stream": 1, "topic": 2, "partition": 3}  # kind -> number of ids in the name


def entity_path(data_path: Path, *ids: int) -> Path:
    """``streams/<s>[/topics/<t>[/partitions/<p>]]`` under ``data_path``."""
    path = data_path / "streams"
    for level, entity_id in zip(("", "topics", "partitions"), ids):
        path = (path / level / str(entity_id)) if level else path / str(entity_id)
    return path


@dataclass(frozen=True)
class Tombstone:
    seq: int
    kind: str
    ids: tuple[int, ...]

    @property
    def name(self) -> str:
        return "-".join([str(self.seq), self.kind, *map(str, self.ids)])

    @classmethod
    def parse(cls, name: str) -> Tombstone | None:
        parts = name.split("-")
        if len(parts) < 2 or parts[1] not in KINDS or len(parts) != 2 + KINDS[parts[1]] \
                or any(number_in_name(p) is None for p in parts[:1] + parts[2:]):
            return None
        return cls(int(parts[0]), parts[1], tuple(int(p) for p in parts[2:]))

    def committed_by(self, event: ev.Event | None) -> bool:
        """``event`` (the record at ``seq``) is the deletion this tombstone belongs to."""
        if self.kind == "stream":
            return isinstance(event, ev.StreamDeleted) and (event.id,) == self.ids
        if self.kind == "topic":
            return isinstance(event, ev.TopicDeleted) and (event.stream_id, event.id) == self.ids
        return isinstance(event, ev.PartitionsDeleted) and \
            (event.stream_id, event.topic_id) == self.ids[:2]


def tombstones_for(seq: int, event: ev.Event, state: Any) -> list[Tombstone]:
    """What a delete event (about to be recorded at ``seq``) removes from disk."""
    if isinstance(event, ev.StreamDeleted):
        return [Tombstone(seq, "stream", (event.id,))]
    if isinstance(event, ev.TopicDeleted):
        return [Tombstone(seq, "topic", (event.stream_id, event.id))]
    if isinstance(event, ev.PartitionsDeleted):
        count = state.streams[event.stream_id].topics[event.topic_id].partitions_count
        return [Tombstone(seq, "partition", (event.stream_id, event.topic_id, pid))
                for pid in range(count - event.count, count)]
    raise TypeError(f"{type(event).__name__} deletes no directory")


class Graveyard:
    """The ``deleting/`` directory of one data path."""

    def __init__(self, data_path: Path) -> None:
        self.data_path = data_path
        self.root = data_path / TOMBSTONE_DIR

    def original(self, stone: Tombstone) -> Path:
        return entity_path(self.data_path, *stone.ids)

    def bury(self, stones: list[Tombstone]) -> list[Tombstone]:
        """Move each existing original into the graveyard; the ones moved. Raises OSError
        (after moving back what was already moved)."""
        buried: list[Tombstone] = []
        try:
            for stone in stones:
                source = self.original(stone)
                if source.exists():
                    self.root.mkdir(mode=0o700, exist_ok=True)
                    os.rename(source, self.root / stone.name)
                    buried.append(stone)
        except OSError:
            self.restore(buried)
            raise
        return buried

    def restore(self, stones: list[Tombstone]) -> None:
        """Move tombstones back where they came from (the deletion did not happen)."""
        for stone in stones:
            target = self.original(stone)
            if target.exists():  # made again after the move: the buried copy is the real one
                shutil.rmtree(target, ignore_errors=True)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(self.root / stone.name, target)

    def remove(self, stones: list[Tombstone]) -> None:
        """Delete tombstones of a committed deletion, in a worker thread when a loop runs."""
        paths = [self.root / stone.name for stone in stones]
        if not paths:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            remove_trees(paths)
            return
        loop.run_in_executor(None, remove_trees, paths)

    def settle(self, event_at: Callable[[int], ev.Event | None]) -> None:
        """Finish committed deletions and undo uncommitted ones (start-up, before partitions
        open). ``event_at(seq)`` is the metadata-log record at ``seq`` or None. Creates the
        graveyard now, so a deletion on a full disk needs no new directory."""
        self.root.mkdir(mode=0o700, exist_ok=True)
        for entry in sorted(self.root.iterdir()):
            stone = Tombstone.parse(entry.name)
            if stone is not None and not stone.committed_by(event_at(stone.seq)):
                log.warning("deletion %s was not recorded before the crash: restoring %s",
                            entry.name, self.original(stone))
                self.restore([stone])
            else:
                log.info("finishing deletion %s", entry.name)
                remove_trees([entry])

    def sweep(self, state: Any) -> None:
        """Move every stream/topic/partition directory ``state`` does not know to
        ``orphans/`` (module docstring). Raises OSError (one could not be moved)."""
        for stream_dir in _numbered(self.data_path / "streams"):
            stream = state.streams.get(int(stream_dir.name))
            if stream is None:
                self._set_aside(stream_dir)
                continue
            for topic_dir in _numbered(stream_dir / "topics"):
                topic = stream.topics.get(int(topic_dir.name))
                if topic is None:
                    self._set_aside(topic_dir)
                    continue
                for partition_dir in _numbered(topic_dir / "partitions"):
                    if int(partition_dir.name) >= topic.partitions_count:
                        self._set_aside(partition_dir)

    def _set_aside(self, path: Path) -> None:
        """Move an orphan directory to ``orphans/<path under streams, '-' for '/'>-<ns>``.
        Raises OSError naming it."""
        rel = path.relative_to(self.data_path / "streams")
        target = self.data_path / ORPHANS_DIR / f"{'-'.join(rel.parts)}-{time.time_ns()}"
        try:
            target.parent.mkdir(mode=0o700, exist_ok=True)
            os.rename(path, target)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot move {path}, a directory the metadata does not "
                          f"know, to {target} ({exc.strerror}): move it out of "
                          f"{self.data_path / 'streams'} by hand") from None
        log.warning("moved orphan directory %s (unknown to the metadata) to %s: delete it "
                    "once checked, or put it back with the metadata that knows it",
                    path, target)


def _numbered(path: Path) -> list[Path]:
    """Sub-directories of ``path`` named by a decimal id in ASCII digits (none when ``path``
    is absent); a directory of any other name is not the server's and is left alone."""
    if not path.is_dir():
        return []
    return [p for p in path.iterdir() if number_in_name(p.name) is not None and p.is_dir()]


def remove_trees(paths: list[Path], otherwise: str = "it is removed at the next start") -> None:
    """Remove each directory; one that stays is logged with ``otherwise`` (what becomes
    of it)."""
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
        if path.exists():
            log.error("could not remove %s; %s", path, otherwise)


_BURY_ERRORS = {"stream": ErrorCode.CANNOT_DELETE_STREAM_DIRECTORY,
                "topic": ErrorCode.CANNOT_DELETE_TOPIC_DIRECTORY,
                "partition": ErrorCode.CANNOT_DELETE_PARTITION_DIRECTORY}


def record_deletion(shard: Any, event: ev.Event, committed: bool = False) -> None:
    """Record a delete event so that a crash at any step leaks nothing: bury its
    directories, write the event, then remove them. Raises IggyError (nothing changed).
    A store that defers effects (a cluster change being decided) only takes the event.
    ``committed``: the deletion is already decided elsewhere (a cluster node applying its
    metadata group's change), so directories that cannot be moved aside do not stop it
    (``_record_in_place``)."""
    if shard.meta.defers_effects:
        shard.meta.record(event)
        return
    stones = tombstones_for(shard.meta.events_count, event, shard.meta.state)
    try:
        buried = shard.graveyard.bury(stones)
    except OSError as exc:
        if committed:
            _record_in_place(shard, event, stones, exc)
            return
        raise IggyError(_BURY_ERRORS[stones[0].kind], f"cannot move aside: {exc}") from exc
    try:
        shard.meta.record(event)
    except IggyError:
        shard.graveyard.restore(buried)
        raise
    shard.graveyard.remove(buried)


def _record_in_place(shard: Any, event: ev.Event, stones: list[Tombstone],
                     refused: OSError) -> None:
    """A committed deletion whose directories cannot be moved aside: the event is written
    all the same (the node's metadata stays its group's), which closes their partitions,
    then the directories are removed where they are, before a later change can give their
    ids to a new stream, topic or partition (a rare path: done in place). A crash
    meanwhile leaves a directory the metadata does not know: the start-up ``sweep`` moves
    it to ``orphans/``."""
    originals = [shard.graveyard.original(stone) for stone in stones]
    log.error("cannot move %s aside for a committed deletion (%s); removing in place",
              ", ".join(map(str, originals)), refused)
    shard.meta.record(event)
    remove_trees(originals, "it is moved to orphans/ at the next start; until then a "
                 "stream, topic or partition created with its ids opens its files")
