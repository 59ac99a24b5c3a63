"""A replica's journal in one file: carries out the storage intents of ``core.replication``.

File layout: ``u64 start`` (the position of the first record kept), then one
``u32 length + bytes`` frame per record, positions counting up from ``start``. The record
bytes are the replica's (checksummed) records; this layer only frames them. A record comes
as bytes or as a list of parts (``journal.record_parts``), written with one ``pwritev``
without joining them; ``read`` returns records as views into the file's bytes.

Intents and their completions (what the replica is told back):
- ``Write(pos, data)``: drops records from ``pos`` on, appends ``data`` -> ``("written", pos)``;
- ``Sync(upto)``: ``fdatasync`` -> ``("synced", upto)``; with ``fsync=False`` the records
  are already in the page cache and nothing more is done (they survive the process, not a
  power loss: the partition groups' durability without ``enforce_fsync``);
- ``Read()``: -> ``("loaded", (records, start))``; a frame cut short by a crash ends the
  list and is cut off the file;
- ``Discard(below)``: rewrites the file without the records before ``below`` (temporary
  file, the kept records copied in the kernel, fsync, rename, fsync of the directory), so a
  crash leaves the old or the new file.
  The replica emits it only once the records from ``below`` on are durable.

``replace_whole`` writes the cluster's other small files (a partition's purge count, the
metadata's prefix) the same crash-safe way: a crash leaves the old or the new content.

Blocking: every method does file I/O. The host runs ``execute`` on one worker thread per
journal, so intents are carried out in the order issued and the event loop never waits.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from lurcher.core.log.io import sync_directory
from lurcher.core.replication.journal import (
    Discard, Read, StorageIntent, StoredRecord, Sync, Write,
)

START = struct.Struct("<Q")
LENGTH = struct.Struct("<I")
IOV_MAX = 1024
Completion = tuple[str, object]


class FileJournal:
    """``first_record``: written (and synced) as record 0 when the file is created, e.g.
    the replica's ``Format`` for a node of a new cluster; without it a new journal is empty,
    which the replica reads as a lost disk (it then recovers from its peers)."""

    def __init__(self, path: Path, first_record: bytes | None = None,
                 fsync: bool = True) -> None:
        self.path, self.fsync = path, fsync
        path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not path.exists()
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self.start = 0
        self.ends: list[int] = []  # file offset just past each record kept
        if fresh:
            os.write(self.fd, START.pack(0))
            if first_record is not None:
                self.write(0, first_record)
            os.fsync(self.fd)
            sync_directory(path.parent)

    def close(self) -> None:
        os.close(self.fd)

    def execute(self, intents: list[StorageIntent]) -> list[Completion]:
        out: list[Completion] = []
        for intent in intents:
            if isinstance(intent, Write):
                self.write(intent.pos, intent.data)
                out.append(("written", intent.pos))
            elif isinstance(intent, Sync):
                if self.fsync:
                    os.fdatasync(self.fd)
                out.append(("synced", intent.upto))
            elif isinstance(intent, Read):
                out.append(("loaded", self.read()))
            elif isinstance(intent, Discard):
                self.discard(intent.below)
        return out

    @property
    def end_offset(self) -> int:
        return self.ends[-1] if self.ends else START.size

    def write(self, pos: int, data: StoredRecord) -> None:
        keep = pos - self.start
        if keep < 0:
            raise ValueError(f"write at {pos} below the journal start {self.start}")
        if keep < len(self.ends):
            del self.ends[keep:]
            os.ftruncate(self.fd, self.end_offset)
        elif keep > len(self.ends):
            raise ValueError(f"write at {pos} leaves a gap after {self.start + len(self.ends)}")
        parts = data if isinstance(data, list) else [data]
        size = sum(map(len, parts))
        _pwrite_all(self.fd, [LENGTH.pack(size), *parts], self.end_offset)
        self.ends.append(self.end_offset + LENGTH.size + size)

    def read(self) -> tuple[list[memoryview], int]:
        raw = Path(self.path).read_bytes()
        view = memoryview(raw)
        self.start = START.unpack_from(raw)[0] if len(raw) >= START.size else 0
        records, self.ends, at = [], [], START.size
        while at + LENGTH.size <= len(raw):
            length = LENGTH.unpack_from(raw, at)[0]
            end = at + LENGTH.size + length
            if end > len(raw):
                break
            records.append(view[at + LENGTH.size:end])
            self.ends.append(end)
            at = end
        if self.end_offset != len(raw):
            os.ftruncate(self.fd, self.end_offset)
        return records, self.start

    def discard(self, below: int) -> None:
        drop = min(max(0, below - self.start), len(self.ends))
        if not drop:
            return
        kept_from, kept_to = self.ends[drop - 1], self.end_offset
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(START.pack(self.start + drop))
            f.flush()
            _copy_range(self.fd, f.fileno(), kept_from, kept_to - kept_from)
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        sync_directory(self.path.parent)
        os.close(self.fd)
        self.fd = os.open(self.path, os.O_RDWR)
        self.start += drop
        self.ends = [end - kept_from + START.size for end in self.ends[drop:]]


def _copy_range(src: int, dst: int, offset: int, count: int) -> None:
    """Append ``count`` bytes of ``src`` from ``offset`` to ``dst`` in the kernel."""
    while count > 0:
        done = os.copy_file_range(src, dst, count, offset)
        if done == 0:
            raise OSError(f"journal shorter than its records ({count} bytes missing)")
        offset, count = offset + done, count - done


def _pwrite_all(fd: int, parts: list, offset: int) -> None:
    """``pwritev`` until every byte of ``parts`` is written (a short write resumes)."""
    views = [memoryview(p).cast("B") for p in parts]
    while views:
        done = os.pwritev(fd, views[:IOV_MAX], offset)
        offset += done
        while views and done >= len(views[0]):
            done -= len(views[0])
            views.pop(0)
        if views and done:
            views[0] = views[0][done:]


def replace_whole(path: Path, data: bytes) -> None:
    """Blocking: ``path`` now holds ``data``, written to a temporary file that is fsynced
    and renamed over it, then the directory fsynced (the temporary file is removed when
    that fails). Raises OSError; ``path`` is then as it was."""
    temporary = path.with_name(path.name + ".tmp")
    try:
        with open(temporary, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    sync_directory(path.parent)
