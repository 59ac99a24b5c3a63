"""Runs many seeds (optionally on a small process pool) and summarises them."""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from lurcher.core.replication.replica import Bug
from lurcher.core.replication.sim.simulator import Outcome, run_seed


@dataclass
class Summary:
    passed: int = 0
    failed: list[Outcome] = field(default_factory=list)
    by_size: dict[int, int] = field(default_factory=dict)
    seconds: float = 0.0
    checkpoint_transfers: int = 0

    @property
    def seeds(self) -> int:
        return self.passed + len(self.failed)


def _run(args: tuple[int, frozenset[Bug]]) -> Outcome:
    return run_seed(*args)


def outcomes(seeds: Iterable[int], bugs: frozenset[Bug] = frozenset(),
             workers: int = 1) -> Iterator[Outcome]:
    jobs = ((seed, bugs) for seed in seeds)
    if workers <= 1:
        yield from map(_run, jobs)
        return
    with ProcessPoolExecutor(workers) as pool:
        yield from pool.map(_run, jobs, chunksize=16)


def run_many(seeds: Iterable[int], bugs: frozenset[Bug] = frozenset(), workers: int = 1,
             stop_at_first_failure: bool = False, until: float | None = None,
             on_outcome: Callable[[Outcome, Summary], None] | None = None) -> Summary:
    summary = Summary()
    started = time.monotonic()
    for outcome in outcomes(seeds, bugs, workers):
        summary.by_size[outcome.replicas] = summary.by_size.get(outcome.replicas, 0) + 1
        summary.checkpoint_transfers += outcome.checkpoint_transfers
        if outcome.ok:
            summary.passed += 1
        else:
            summary.failed.append(outcome)
            if stop_at_first_failure:
                break
        if on_outcome is not None:
            on_outcome(outcome, summary)
        if until is not None and time.monotonic() >= until:
            break
    summary.seconds = time.monotonic() - started
    return summary
