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

The last reference may go on another thread (a writer or fsync thread dropping the
completion of a job that held the handle): the close is then handed to the event loop the
handle was opened on, because backends keep per-file state that only that loop may change
(``direct.DirectIo``). Without a running loop at open (tools, start-up) it closes in place.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import threading
from collections import OrderedDict
from typing import Any

from lurcher.core.log.io import IoBackend, PosixIo

log = logging.getLogger(__name__)

DEFAULT_MAX_OPEN_FILES = 512


class FileHandle:
    """One open descriptor; closed when the last reference goes (or ``close``), on the
    thread of the event loop it was opened on (module docstring)."""

    __slots__ = ("fd", "io", "path", "thread", "loop")

    def __init__(self, io: IoBackend, fd: int, path: str) -> None:
        self.io = io
        self.fd = fd
        self.path = path
        self.thread = threading.get_ident()
        self.loop: Any = asyncio._get_running_loop()

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            _close(self.io, fd, self.path)

    def __del__(self) -> None:
        if self.fd >= 0 and self.loop is not None and threading.get_ident() != self.thread:
            fd, self.fd = self.fd, -1
            try:
                self.loop.call_soon_threadsafe(_close, self.io, fd, self.path)
                return
            except RuntimeError:  # the loop is closed: nothing else runs there any more
                self.fd = fd
        self.close()


def _close(io: IoBackend, fd: int, path: str) -> None:
    try:
        io.close(fd)
    except OSError as exc:
        log.warning("closing %s failed: %s", path, exc)


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

    def forget_under(self, directory: str) -> None:
        """Drop every cached file under ``directory`` (about to be removed), so that a file
        made later at one of its paths is never written through a descriptor of the old one."""
        prefix = directory.rstrip("/") + "/"
        for path in [p for p in self._handles if p.startswith(prefix)]:
            self.forget(path)

    def clear(self) -> None:
        self._handles.clear()
