"""Runs one plan of actors as separate processes (multiprocessing, spawn) and collects them.

Each actor gets its own interpreter, so no GIL is shared between actors or with the
coordinator. The coordinator waits until every actor is connected and warmed up (a barrier),
then shows progress (tqdm when installed, else a plain line on stderr) from the shared
per-actor counters, and gathers the ``ActorResult``s. A failing actor stops the others and
raises ``ActorFailed`` with its traceback; so does an actor process that dies silently.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import sys
import time
from collections.abc import Callable
from threading import BrokenBarrierError

from lurcher.bench.actor import BARRIER_TIMEOUT_S, ActorResult, Shared, actor_main
from lurcher.bench.options import BenchOptions
from lurcher.bench.workloads import CONSUMER, ActorSpec

PROGRESS_INTERVAL_S = 0.2
JOIN_TIMEOUT_S = 10.0


class ActorFailed(RuntimeError):
    """An actor raised or died; the message carries its traceback."""


def expected_messages(specs: list[ActorSpec], options: BenchOptions) -> int | None:
    """Messages the whole plan handles (None in duration mode)."""
    if options.message_batches is None:
        return None
    per_batches = options.message_batches * options.messages_per_batch
    groups: dict[int, int] = {}
    total = 0
    for s in specs:
        if s.role == CONSUMER and s.group is not None:
            groups[s.group] = s.target_messages or 0
        elif s.role == CONSUMER:
            total += s.target_messages or 0
        else:
            total += per_batches
    return total + sum(groups.values())


class Progress:
    """A progress display over message counts (or seconds in duration mode)."""

    def __init__(self, label: str, total: int | None, duration_s: float | None,
                 enabled: bool) -> None:
        self.label, self.total, self.duration_s, self.enabled = label, total, duration_s, enabled
        self.bar = None
        self.started = time.monotonic()
        if not enabled:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        unit_total = total if total is not None else duration_s
        self.bar = tqdm(total=unit_total, desc=label, unit="msg" if total else "s",
                        unit_scale=True, file=sys.stderr, leave=False, dynamic_ncols=True)

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.started
        if self.bar is not None:
            self.bar.n = done if self.total is not None else min(elapsed, self.duration_s or 0)
            self.bar.set_postfix_str(f"{done:,} msgs", refresh=False)
            self.bar.refresh()
        else:
            print(f"\r{self.label}: {done:,} msgs, {elapsed:.1f}s", end="", file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.enabled:
            print(file=sys.stderr)


def run_actors(target: str, address: str, specs: list[ActorSpec], options: BenchOptions,
               label: str, on_start: Callable[[], None] | None = None) -> list[ActorResult]:
    """Run every actor of ``specs`` to completion. Raises ActorFailed."""
    ctx = mp.get_context("spawn")
    groups = max((s.group or 0 for s in specs), default=0)
    shared = Shared(ctx, len(specs), groups)
    procs = [ctx.Process(target=actor_main, args=(target, address, spec, options, shared, i),
                         name=f"bench-{spec.role}-{spec.actor_id}", daemon=True)
             for i, spec in enumerate(specs)]
    for p in procs:
        p.start()
    try:
        return _collect(procs, shared, specs, options, label, on_start)
    finally:
        shared.stop.value = 1
        for p in procs:
            p.join(JOIN_TIMEOUT_S)
            if p.is_alive():
                p.kill()


def _wait_ready(procs: list, shared: Shared, results: dict) -> None:
    try:
        shared.barrier.wait(BARRIER_TIMEOUT_S)
    except BrokenBarrierError:
        _drain(shared, results, timeout_s=2.0)
        _raise_failures(results, procs)
        raise ActorFailed("actors did not get ready in time") from None


def _drain(shared: Shared, results: dict, timeout_s: float) -> None:
    try:
        while True:
            index, result = shared.results.get(timeout=timeout_s)
            results[index] = result
            timeout_s = 0.05
    except queue.Empty:
        pass


def _raise_failures(results: dict, procs: list) -> None:
    for index, result in results.items():
        if isinstance(result, str):
            raise ActorFailed(f"{procs[index].name} failed:\n{result}")


def _collect(procs: list, shared: Shared, specs: list[ActorSpec], options: BenchOptions,
             label: str, on_start: Callable[[], None] | None) -> list[ActorResult]:
    results: dict[int, ActorResult | str] = {}
    _wait_ready(procs, shared, results)
    if on_start is not None:
        on_start()
    progress = Progress(label, expected_messages(specs, options), options.duration_s,
                        options.progress)
    try:
        while len(results) < len(procs):
            _drain(shared, results, PROGRESS_INTERVAL_S)
            progress.update(sum(shared.progress[:]))
            _raise_failures(results, procs)
            dead = [p for i, p in enumerate(procs) if i not in results and p.exitcode is not None]
            if dead:
                _drain(shared, results, 1.0)
                _raise_failures(results, procs)
                if any(i not in results for i, p in enumerate(procs) if p in dead):
                    raise ActorFailed(f"{dead[0].name} exited with {dead[0].exitcode}")
    finally:
        progress.close()
    return [results[i] for i in range(len(procs))]  # type: ignore[misc]
