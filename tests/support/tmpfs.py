"""A size-limited tmpfs mounted by a test, so "the disk is full" is real.

``mounted(path, size)`` mounts a tmpfs of ``size`` (a mount(8) size, e.g. "3m") on ``path``
and unmounts it afterwards; where this process may not mount (not root, no CAP_SYS_ADMIN,
a container without the right) it skips the test and says why. ``resize`` grows or shrinks
the mounted tmpfs in place (its files stay).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=30)


@contextmanager
def mounted(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    done = _run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)])
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (mount said: {done.stderr.strip()}); "
                    f"this disk-full test needs the right to mount")
    try:
        yield path
    finally:
        if _run(["umount", str(path)]).returncode != 0:
            _run(["umount", "-l", str(path)])


def resize(path: Path, size: str) -> None:
    done = _run(["mount", "-o", f"remount,size={size}", str(path)])
    assert done.returncode == 0, f"cannot resize the tmpfs: {done.stderr.strip()}"


def fill_up(path: Path) -> int:
    """Write a filler file in ``path`` until the file system is full; its size."""
    written = 0
    with open(path / "filler", "wb", buffering=0) as f:
        chunk = b"\xee" * 4096
        try:
            while True:
                written += f.write(chunk)
        except OSError:
            return written
