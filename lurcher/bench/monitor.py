"""``ServerMonitor``: samples a server's CPU and RSS (psutil) in a background thread.

CPU percent and RSS are summed over the process and its children (a multi-process server
counts whole; its children are looked up at most once a second, since that walks every
process of the machine). Samples are ``(monotonic_time, cpu_percent, rss_bytes)``; 100% = one core.
A vanished process ends sampling quietly. Without psutil or a pid, nothing is sampled.
"""

from __future__ import annotations

import threading
import time

try:
    import psutil
except ImportError:  # pragma: no cover - psutil is a core dependency
    psutil = None


TREE_REFRESH_S = 1.0


def _child_rss(proc) -> int:
    """RSS bytes of child ``proc``; 0 once it has exited."""
    try:
        return proc.memory_info().rss
    except psutil.Error:
        return 0


def _tree(proc) -> list:
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return [proc]


def sample_rss(pid: int | None) -> int | None:
    """RSS bytes of ``pid`` and its children now (None when unknown)."""
    if pid is None or psutil is None:
        return None
    try:
        return sum(p.memory_info().rss for p in _tree(psutil.Process(pid)))
    except psutil.Error:
        return None


class ServerMonitor:
    def __init__(self, pid: int | None, interval_s: float) -> None:
        self.pid = pid
        self.interval_s = interval_s
        self.samples: list[tuple[float, float, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._procs: dict[int, object] = {}
        self._tree: list = []
        self._tree_at = float("-inf")

    def start(self) -> ServerMonitor:
        if self.pid is None or psutil is None:
            return self
        try:
            self._root = psutil.Process(self.pid)
        except psutil.Error:
            return self
        self._cpu(self._members())  # the first cpu_percent call only primes the counters
        self._thread = threading.Thread(target=self._run, name="server-monitor", daemon=True)
        self._thread.start()
        return self

    def _members(self) -> list:
        """The process and its children; the children are looked up (a walk over every
        process of the machine) at most every ``TREE_REFRESH_S``, not at each sample."""
        now = time.monotonic()
        if now - self._tree_at >= TREE_REFRESH_S:
            self._tree, self._tree_at = _tree(self._root), now
        return self._tree

    def _cpu(self, members: list) -> float:
        total = 0.0
        for p in members:
            proc = self._procs.setdefault(p.pid, p)
            try:
                total += proc.cpu_percent(None)
            except psutil.Error:
                pass
        return total

    def _sample(self) -> bool:
        members = self._members()
        try:
            cpu = self._cpu(members)
            rss = self._root.memory_info().rss + sum(_child_rss(p) for p in members[1:])
        except psutil.Error:
            return False
        self.samples.append((time.monotonic(), cpu, rss))
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if not self._sample():
                return

    def stop(self) -> list[tuple[float, float, int]]:
        """Stop sampling (taking a last sample) and return every sample."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._sample()
        return self.samples
