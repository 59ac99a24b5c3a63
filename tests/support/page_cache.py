"""Page-cache residency of a file (``mincore``), for the drop-behind tests."""

from __future__ import annotations

import ctypes
import mmap
import os

import pytest


def resident_pages(path: str) -> list[bool]:
    """Which pages of ``path`` are in the page cache (mincore over a shared mapping)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = os.path.getsize(path)
    pages = -(-size // mmap.PAGESIZE)
    fd = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert address not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
        vector = ctypes.create_string_buffer(pages)
        assert libc.mincore(address, size, vector) == 0, os.strerror(ctypes.get_errno())
        libc.munmap(address, size)
    finally:
        os.close(fd)
    return [byte & 1 == 1 for byte in vector.raw]


def file_system(path: str) -> str:
    """The type of the file system ``path`` is on ("ext4", "tmpfs", ...; "" when unknown)."""
    best, kind = "", ""
    with open("/proc/mounts") as mounts:
        for line in mounts:
            fields = line.split()
            point = fields[1]
            if path.startswith(point.rstrip("/") + "/") and len(point) > len(best):
                best, kind = point, fields[2]
    return kind


def require_disk_file_system(path: str) -> None:
    """Skip the calling test (naming why) when ``path`` is not on a disk file system: page
    cache eviction cannot be observed on tmpfs or ramfs. CI's tmp dir is on disk."""
    if file_system(path) in ("tmpfs", "ramfs", ""):
        pytest.skip(f"page cache eviction needs a disk file system under {path}")
