"""GetSnapshotFile: a ZIP of diagnostics for operators, one entry per requested type.

Entries: ``filesystem_overview.txt`` (every file under ``system.path`` with its size),
``process_list.txt`` (this server's processes), ``resource_usage.txt`` (CPU, memory, disk),
``test.txt``, ``server_logs/`` (the last 8 MiB of the log file and of its rotated
copies when ``system.logging.file`` is set) and ``server_config.json`` (the effective
configuration). Invariants: no secret leaves the server (configuration keys naming a secret or
password are redacted); the ZIP is built in a worker thread, never on the event loop.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any, Callable

import psutil

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.requests.system.get_snapshot_file import ALL_TYPES, SNAPSHOT_TYPES
from lurcher.logsetup import log_file_path

ZIP_METHODS = {1: zipfile.ZIP_STORED, 2: zipfile.ZIP_DEFLATED, 3: zipfile.ZIP_BZIP2,
               5: zipfile.ZIP_LZMA, 6: zipfile.ZIP_LZMA}
SECRET_WORDS = ("secret", "password")
REDACTED = "<redacted>"
LOG_TAIL_BYTES = 8 * 1024 * 1024  # per log file: memory stays bounded


def zip_method(compression: int) -> int:
    """The zipfile method for an Iggy compression code. Raises IggyError (zstd)."""
    if compression not in ZIP_METHODS:
        raise IggyError(ErrorCode.FEATURE_UNAVAILABLE, "zstd snapshots are not supported")
    return ZIP_METHODS[compression]


def redacted(tree: Any) -> Any:
    if not isinstance(tree, dict):
        return tree
    return {k: (REDACTED if v and any(w in k for w in SECRET_WORDS) else redacted(v))
            for k, v in tree.items()}


def _filesystem(data_path: Path, config: Any) -> list[tuple[str, bytes]]:
    lines = []
    for root, _, files in os.walk(data_path):
        for name in sorted(files):
            path = Path(root) / name
            try:
                lines.append(f"{path.stat().st_size:>14} {path.relative_to(data_path)}")
            except OSError:
                continue  # removed meanwhile
    return [("filesystem_overview.txt", "\n".join(lines).encode())]


def _processes(data_path: Path, config: Any) -> list[tuple[str, bytes]]:
    me = psutil.Process()
    procs = [me.parent(), me, *me.children(recursive=True)] if me.parent() else [me]
    lines = [f"{p.pid:>8} {p.name()} {' '.join(p.cmdline())}" for p in procs if p is not None]
    return [("process_list.txt", "\n".join(lines).encode())]


def _resources(data_path: Path, config: Any) -> list[tuple[str, bytes]]:
    me, memory, disk = psutil.Process(), psutil.virtual_memory(), psutil.disk_usage(data_path)
    doc = {"cpu_percent": psutil.cpu_percent(), "cpu_count": os.cpu_count(),
           "process_rss_bytes": me.memory_info().rss, "memory_total_bytes": memory.total,
           "memory_available_bytes": memory.available, "disk_total_bytes": disk.total,
           "disk_free_bytes": disk.free}
    return [("resource_usage.txt", json.dumps(doc, indent=2).encode())]


def _test(data_path: Path, config: Any) -> list[tuple[str, bytes]]:
    return [("test.txt", b"test\n")]


def _logs(data_path: Path, config: Any) -> list[tuple[str, bytes]]:
    path = log_file_path(config.typed.system.logging, data_path)
    if path is None:
        return [("server_logs/README.txt", b"system.logging.file is not set: the server "
                 b"logs to stderr only\n")]
    return [(f"server_logs/{p.name}", _tail(p))
            for p in sorted(path.parent.glob(path.name + "*")) if p.is_file()]


def _tail(path: Path) -> bytes:
    with open(path, "rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - LOG_TAIL_BYTES))
        return f.read()


def _config(data_path: Path, config: Any) -> list[tuple[str, bytes]]:
    return [("server_config.json", json.dumps(redacted(config.data), indent=2).encode())]


PARTS: dict[int, Callable[[Path, Any], list[tuple[str, bytes]]]] = {
    1: _filesystem, 2: _processes, 3: _resources, 4: _test, 5: _logs, 6: _config}


def build_snapshot(data_path: Path, config: Any, compression: int, types: list[int]) -> bytes:
    """The ZIP bytes for ``types`` (100 = all). Raises IggyError for zstd."""
    method = zip_method(compression)
    wanted = sorted(PARTS) if ALL_TYPES in types else sorted(set(types) & set(SNAPSHOT_TYPES))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=method) as archive:
        for code in wanted:
            for name, data in PARTS[code](data_path, config):
                archive.writestr(name, data)
    return out.getvalue()
