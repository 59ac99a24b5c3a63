"""``python -m lurcher.core.replication.sim``: replay one seed or run many.

  --seed S            replay one seed and print its outcome and trace hash
  --seeds N           run seeds FIRST..FIRST+N-1 (default FIRST 0)
  --minutes M         run consecutive seeds for M minutes
  --workers W         processes (default 1)
  --progress N        print a progress line every N seeds
  --bug NAME          plant a deliberate bug (repeatable), for the mutation check
A failing seed prints a one-line replay command.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time

from lurcher.core.replication.replica import Bug
from lurcher.core.replication.sim.runner import Summary, run_many
from lurcher.core.replication.sim.simulator import Outcome, run_seed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lurcher.core.replication.sim")
    p.add_argument("--seed", type=int)
    p.add_argument("--seeds", type=int)
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--minutes", type=float)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--progress", type=int, default=0, help="print a line every N seeds")
    p.add_argument("--bug", action="append", default=[], choices=[b.value for b in Bug])
    args = p.parse_args(argv)
    bugs = frozenset(Bug(b) for b in args.bug)
    if args.seed is not None:
        out = run_seed(args.seed, bugs)
        print(f"seed {out.seed}: {out.replicas} replicas, {out.ticks} ticks, "
              f"trace {out.trace}, {out.checkpoint_transfers} checkpoint transfer(s): {out.reason}")
        return 0 if out.ok else 1
    if args.seeds is None and args.minutes is None:
        p.error("give --seed, --seeds or --minutes")
    seeds = (range(args.first, args.first + args.seeds) if args.seeds is not None
             else itertools.count(args.first))
    until = time.monotonic() + args.minutes * 60 if args.minutes else None
    started = time.monotonic()

    def report(out: Outcome, summary: Summary) -> None:
        if not out.ok:
            print(f"FAIL seed {out.seed}: {out.reason}\n  replay: {out.replay_command(bugs)}",
                  flush=True)
        if args.progress and summary.seeds % args.progress == 0:
            print(f"progress: {summary.passed}/{summary.seeds} passed, last seed {out.seed}, "
                  f"{time.monotonic() - started:.0f}s", flush=True)

    summary = run_many(seeds, bugs, args.workers, until=until, on_outcome=report)
    rate = summary.seeds / summary.seconds if summary.seconds else 0.0
    sizes = ", ".join(f"{k} replicas: {v}" for k, v in sorted(summary.by_size.items()))
    print(f"{summary.passed}/{summary.seeds} seeds passed ({sizes}) in "
          f"{summary.seconds:.1f}s, {rate:.1f} seeds/s, "
          f"{summary.checkpoint_transfers} checkpoint transfers")
    return 0 if not summary.failed else 1


if __name__ == "__main__":
    sys.exit(main())
