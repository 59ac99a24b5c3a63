"""One server's data directory (``system.path``): its exclusive lock and its runtime files.

Invariants: at most one server (a process and its shard processes) works on a data
directory at a time. The main process takes ``fcntl.flock`` on ``<path>/lurcher.lock``
before anything in the directory is read or written and holds it until it exits; shard
processes inherit the locked descriptor, so the lock lasts while any of them runs. The lock
file holds the owner's pid and is never deleted (deleting it would let a second server lock
a new inode while the first still holds the old one). ``runtime/endpoints.json`` and
``runtime/shard-<id>.pid`` exist only while the server runs: a clean stop removes them.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

LOCK_FILE = "lurcher.lock"
RUNTIME_DIR = "runtime"
ENDPOINTS_FILE = "endpoints.json"


class DataDirInUse(RuntimeError):
    """Another server holds the data directory's lock."""


def resolve(path: str) -> Path:
    """``system.path`` as an absolute path (``~`` expanded, relative to the working dir)."""
    return Path(path).expanduser().resolve()


def lock(data_path: Path) -> int:
    """Lock ``data_path`` (created if absent) for this process; the locked descriptor.
    Raises DataDirInUse naming the holder's pid, or OSError."""
    data_path.mkdir(parents=True, exist_ok=True)
    fd = os.open(data_path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise DataDirInUse(
            f"data directory {data_path} is in use by another lurcher-server (pid {holder}); "
            f"stop that server or set system.path to another directory") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def runtime_file(data_path: Path, name: str) -> Path:
    return data_path / RUNTIME_DIR / name


def write_runtime_file(data_path: Path, name: str, text: str) -> None:
    """Write ``runtime/<name>`` atomically (readers never see a partial file)."""
    target = runtime_file(data_path, name)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, target)


def write_endpoints(data_path: Path, endpoints: dict[str, str]) -> None:
    write_runtime_file(data_path, ENDPOINTS_FILE, json.dumps(endpoints))


def write_pid_file(data_path: Path, shard_id: int) -> None:
    """``runtime/shard-<id>.pid``: which process serves which shard (operators, tests)."""
    write_runtime_file(data_path, pid_file_name(shard_id), str(os.getpid()))


def pid_file_name(shard_id: int) -> str:
    return f"shard-{shard_id}.pid"


def remove_runtime_file(data_path: Path, name: str) -> None:
    runtime_file(data_path, name).unlink(missing_ok=True)
