"""A bounded cache of open segment files (``.log`` / ``.index``), least recently used first out.

Segments do not hold descriptors: they ask the cache for a ``FileHandle`` each time they
touch a file, so a shard with many partitions keeps at most ``capacity`` segment files open
(``system.segment.max_open_files``), whatever the partition count.

Invariants: the cache holds at most ``capacity`` handles; a handle's descriptor stays open
while anything references the handle (a poll's ``ByteRange`` being sent with ``sendfile``, a
group-commit round about to fsync it) and is closed once the cache has evicted or forgotten
it and the last reference is gone (CPython reference counting). So a descriptor number is
never closed under a reader and never reused for another file while a reader holds it; the
open descriptors are at most ``capacity`` plus those of replies in flight.
A caller must keep the handle (not just its ``fd``) in a local while it uses the descriptor.
"""

from __future__ import annotations

import errno
import logging
from collections import OrderedDict

from lurcher.core.log.io import IoBackend, PosixIo

log = logging.getLogger(__name__)

DEFAULT_MAX_OPEN_FILES = 512


class FileHandle:
    """One open descriptor; closed when the last reference goes (or ``close``)."""

    __slots__ = ("fd", "io", "path")

    def __init__(self, io: IoBackend, fd: int, path: str) -> None:
        self.io = io
        self.fd = fd
        self.path = path

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            self.io.close(fd)

    def __del__(self) -> None:
        try:
            self.close()
        except OSError as exc:
            log.warning("closing %s failed: %s", self.path, exc)


class DescriptorCache:
    """Open handles by path, at most ``capacity``, least recently used evicted first."""

    def __init__(self, io: IoBackend | None = None,
                 capacity: int = DEFAULT_MAX_OPEN_FILES) -> None:
        if capacity < 2:
            raise ValueError(f"max_open_files must be at least 2, got {capacity}")
        self.io = io or PosixIo()
        self.capacity = capacity
        self.opens = 0
        self._handles: OrderedDict[str, FileHandle] = OrderedDict()

    def __len__(self) -> int:
        return len(self._handles)

    def get(self, path: str, create: bool = False) -> FileHandle:
        """The open handle of ``path``, opening it (read-write) when not cached.

        Raises OSError (FileNotFoundError when absent and not ``create``)."""
        handle = self._handles.get(path)
        if handle is not None:
            self._handles.move_to_end(path)
            return handle
        handle = FileHandle(self.io, self._open(path, create), path)
        self.opens += 1
        self._handles[path] = handle
        while len(self._handles) > self.capacity:
            self._handles.popitem(last=False)
        return handle

    def _open(self, path: str, create: bool) -> int:
        """Open, evicting half the cache once if the process is out of descriptors."""
        try:
            return self.io.open(path, create)
        except OSError as exc:
            if exc.errno != errno.EMFILE or not self._handles:
                raise
            log.warning("out of file descriptors with %d segment files open; evicting half",
                        len(self._handles))
            for _ in range(max(1, len(self._handles) // 2)):
                self._handles.popitem(last=False)
            return self.io.open(path, create)

    def forget(self, path: str) -> None:
        """Drop ``path`` from the cache (its descriptor closes once no reader holds it)."""
        self._handles.pop(path, None)

    def clear(self) -> None:
        self._handles.clear()
