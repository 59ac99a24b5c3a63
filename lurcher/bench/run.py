"""``run_benchmark``: one workload on one target, end to end.

Order: validate options, start the target's server on a temp dir (unless
``server_address`` is given), create streams/topics/groups, store the data a consumer-only
workload reads (seeding, not measured) and sample the server's RSS after it, then run the
measured actors while monitoring the server, stop the server, and write ``result.json`` and
the charts into ``<output_dir>/<run name>/``. The printed table goes to stdout.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec

from lurcher.bench import charts, drivers, metrics, report, servers
from lurcher.bench.monitor import ServerMonitor, sample_rss
from lurcher.bench.options import BenchOptions
from lurcher.bench.runner import run_actors
from lurcher.bench.workloads import layout, plan, seed_plan

SETTLE_S = 0.5


class RunOutput(msgspec.Struct):
    doc: dict
    directory: Path
    result_path: Path
    charts: list[Path]
    table: str


def _seed(target: str, address: str, o: BenchOptions) -> None:
    specs = seed_plan(o)
    if specs:
        seeding = msgspec.structs.replace(o, message_batches=o.seed_batches, duration_s=None,
                                          warmup_s=0.0)
        run_actors(target, address, specs, seeding, label=f"{target}: storing data")


def _measure(target: str, address: str, pid: int | None, o: BenchOptions):
    monitor = ServerMonitor(pid, o.sampling_s)
    results = run_actors(target, address, plan(o), o, label=f"{target}: {o.workload}",
                         on_start=monitor.start)
    return results, monitor.stop()


def run_benchmark(options: BenchOptions, directory: Path | None = None,
                  echo: bool = True) -> RunOutput:
    """Run one benchmark. Raises BenchOptionsError, MissingBinaryError, ServerStartError,
    DriverUnavailable, ActorFailed, or the target client's connection errors."""
    o = options.validate()
    specs_layout = layout(o)
    drivers.module(o.target)
    server = None if o.server_address else servers.start(o.target, o.enforce_fsync, o.transport)
    try:
        address = o.server_address or server.address
        pid = o.server_pid if server is None else server.pid
        asyncio.run(drivers.prepare(o.target, address, o, specs_layout))
        _seed(o.target, address, o)
        rss_after_setup = sample_rss(pid)
        results, samples = _measure(o.target, address, pid, o)
    finally:
        if server is not None:
            server.stop()
    summary = metrics.summarize(results, o)
    notes = server.notes if server is not None else []
    doc = report.document(o, summary, report.server_section(
        pid, samples, summary["t0"], rss_after_setup, notes))
    directory = directory or Path(o.output_dir) / report.run_name(o)
    path = report.write(doc, directory)
    pngs = charts.write_run_charts(doc, directory) if o.charts else []
    text = report.table(doc)
    if echo:
        print(text, flush=True)
        print(f"results: {path}", flush=True)
    return RunOutput(doc, directory, path, pngs, text)
