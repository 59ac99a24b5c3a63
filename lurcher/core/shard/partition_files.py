"""A new partition's files: made before its event is recorded, opened again when needed.

CreateTopic and CreatePartitions create each new partition's directory and segment files
(open, then close) before they write their event to the metadata log, as Iggy 0.8 creates
the file hierarchy before it adds the topic or partitions. If one cannot be made
(descriptors used up, a directory that cannot be written, a full disk) the command fails
with an Iggy error, the directories it made are removed, their descriptors forgotten, and
nothing is recorded. A store that defers effects (a cluster change being decided) makes them
when the event is applied.

Invariant: a partition the metadata has was created with its files; a shard that owns it
and cannot open it when it applies the event (its own descriptors used up) logs one line
and opens it at its next use (``open_later``), so it becomes usable once the cause goes
away, without a restart, and a restart finds its directory where it belongs.
"""

from __future__ import annotations

import errno
import logging
from pathlib import Path
from typing import Any, Iterable

from lurcher.core.log.io import is_no_space
from lurcher.core.log.partition import Partition
from lurcher.core.shard.tombstones import remove_trees
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

log = logging.getLogger(__name__)

# what becomes of a directory a refused creation could not remove (no data in it)
LEFT_BEHIND = ("the next creation of that id uses it, or the next start moves it to "
               "orphans/ (it holds no messages)")


def create_partition_files(shard: Any, stream_id: int, topic_id: int,
                           partition_ids: Iterable[int]) -> None:
    """Make the directory and files of each new partition. Raises IggyError (nothing left
    behind): CANNOT_WRITE_TO_FILE on a full disk, CANNOT_CREATE_PARTITION_DIRECTORY when a
    directory cannot be made, CANNOT_CREATE_PARTITION otherwise."""
    if shard.meta.defers_effects:
        return
    paths = {pid: shard.partition_path(stream_id, topic_id, pid) for pid in partition_ids}
    topics_dir = shard.partition_path(stream_id, topic_id, 0).parent.parent.parent
    made = {root for path in paths.values()
            if (root := _first_missing(path, topics_dir)) is not None}
    try:
        for pid, path in paths.items():
            Partition.open(str(path), pid, shard.log_config, clock=shard.clock,
                           files=shard.files).close()
    except OSError as exc:
        for root in made:
            shard.files.forget_under(str(root))
        remove_trees(sorted(made), LEFT_BEHIND)
        raise IggyError(_creation_error(exc), f"cannot create the files of a partition of "
                                              f"topic {topic_id} in stream {stream_id}: "
                                              f"{exc}") from exc


def _first_missing(path: Path, stop: Path) -> Path | None:
    """The highest directory from ``path`` up to (not including) ``stop`` that does not
    exist: removing it removes what making ``path`` made (the topic's directory for a new
    topic, never a stream's). None when ``path`` exists."""
    missing = None
    while path != stop and not path.exists():
        missing, path = path, path.parent
    return missing


def _creation_error(exc: OSError) -> int:
    if is_no_space(exc):
        return ErrorCode.CANNOT_WRITE_TO_FILE
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EEXIST):
        return ErrorCode.CANNOT_CREATE_PARTITION_DIRECTORY
    return ErrorCode.CANNOT_CREATE_PARTITION


def open_now_or_later(shard: Any, topic: Any, partition_id: int) -> None:
    """Open an owned partition a shard applied the creation of; when that fails, log one
    line: ``open_later`` opens it at its next use."""
    try:
        shard.open_partition(topic, partition_id)
    except (OSError, IggyError) as exc:
        log.error("partition %d of topic %d in stream %d cannot be opened now (%s): it is "
                  "opened when next used", partition_id, topic.id, topic.stream_id, exc)


def open_later(shard: Any, topic: Any, partition_id: int) -> Any:
    """An owned partition of the metadata this shard has not opened yet (``open_now_or_later``
    failed), opened now; None when it is not such a partition (or on a cluster node, whose
    partitions its replication groups open). Raises IggyError
    CANNOT_CREATE_PARTITION (logged) when it still cannot be opened."""
    if shard.config.typed.cluster.enabled or not 0 <= partition_id < topic.partitions_count \
            or not shard.owns(topic.stream_id, topic.id, partition_id):
        return None
    try:
        return shard.open_partition(topic, partition_id)
    except OSError as exc:
        log.error("partition %d of topic %d in stream %d cannot be opened: %s", partition_id,
                  topic.id, topic.stream_id, exc)
        raise IggyError(ErrorCode.CANNOT_CREATE_PARTITION,
                        f"partition {partition_id} cannot be opened: {exc}") from exc
