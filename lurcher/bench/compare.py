"""``compare``: one workload on lurcher, Redis, NATS and RabbitMQ Streams in one go (or on
the ``--targets`` given, e.g. ``lurcher lurcher-cluster:1 lurcher-cluster:3``: a single node
beside a 3-node cluster with topics of replication factor 1 and 3), and a table of ratios.

Every target runs with identical options (each with its own freshly started server unless
``--server-address`` is given, which applies to lurcher only). Rows are throughput and the
pooled per-batch latency percentiles of the whole run plus the server's CPU and RSS;
ratio columns divide lurcher's value by the peer's (for throughput higher is better, for
latency, CPU and memory lower is better). ``compare.json`` and ``compare.png`` are written
into ``<output_dir>/compare_<run name>/``.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from lurcher.bench import charts, report
from lurcher.bench.options import BenchOptions, target_options
from lurcher.bench.run import run_benchmark

PEERS = ("redis", "nats", "rabbitmq")
MIB = 1 << 20

# (label, getter over a result document, better: "higher" | "lower")
ROWS = [
    ("msg/s (total)", lambda d: d["total"]["total_throughput_messages_per_second"], "higher"),
    ("MB/s (total)", lambda d: d["total"]["total_throughput_megabytes_per_second"], "higher"),
    ("latency avg ms", lambda d: d["total"]["avg_latency_ms"], "lower"),
    ("latency p50 ms", lambda d: d["total"]["p50_latency_ms"], "lower"),
    ("latency p90 ms", lambda d: d["total"]["p90_latency_ms"], "lower"),
    ("latency p99 ms", lambda d: d["total"]["p99_latency_ms"], "lower"),
    ("latency p99.9 ms", lambda d: d["total"]["p999_latency_ms"], "lower"),
    ("latency p99.99 ms", lambda d: d["total"]["p9999_latency_ms"], "lower"),
    ("latency max ms", lambda d: d["total"]["max_latency_ms"], "lower"),
    ("server CPU avg %", lambda d: d["server"]["cpu_percent_avg"], "lower"),
    ("server RSS max MiB", lambda d: _mib(d["server"]["rss_bytes_max"]), "lower"),
    ("server RSS after setup MiB", lambda d: _mib(d["server"]["rss_bytes_after_setup"]),
     "lower"),
]


def _mib(v: int | None) -> float | None:
    return None if v is None else v / MIB


def _cell(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or not b else f"{a / b:.2f}x"


def compare_table(docs: dict[str, dict]) -> str:
    names = list(docs)
    peers = [n for n in names if n != "lurcher"]
    head = ["metric".ljust(28)] + [n.rjust(12) for n in names] + [
        f"lurcher/{p}".rjust(15) for p in peers if "lurcher" in docs]
    lines = [" ".join(head)]
    for label, get, _ in ROWS:
        values = {n: get(docs[n]) for n in names}
        cells = [label.ljust(28)] + [_cell(values[n]).rjust(12) for n in names]
        if "lurcher" in docs:
            cells += [_ratio(values["lurcher"], values[p]).rjust(15) for p in peers]
        lines.append(" ".join(cells))
    return "\n".join(lines)


def run_compare(options: BenchOptions, targets: tuple[str, ...] = ("lurcher", *PEERS),
                echo: bool = True) -> tuple[dict[str, dict], str, Path]:
    """Run ``options.workload`` on each target; returns (docs, table, compare dir).

    Raises what ``run_benchmark`` raises (a missing peer binary names its apt package)."""
    o = options.validate()
    base = Path(o.output_dir) / f"compare_{report.run_name(o).replace('_lurcher_', '_')}"
    runs = [target_options(o, text) for text in targets]  # all checked before any run
    docs: dict[str, dict] = {}
    for label, t_opts in runs:
        docs[label] = run_benchmark(t_opts, base / label, echo=echo).doc
    volume = f"{o.message_batches} batches" if o.message_batches else f"{o.duration_s:g}s"
    text = (f"compare {o.workload}: {o.message_size} B x {o.messages_per_batch} msgs/batch, "
            f"{o.producers} producer(s), {o.consumers} consumer(s), {volume} per actor"
            f"\n{compare_table(docs)}")
    base.mkdir(parents=True, exist_ok=True)
    (base / "compare.json").write_bytes(msgspec.json.format(msgspec.json.encode(
        {"workload": o.workload, "table": text,
         "targets": {n: {"total": d["total"], "server": {k: v for k, v in d["server"].items()
                                                         if k != "samples"}}
                     for n, d in docs.items()}}), indent=2))
    if o.charts:
        charts.write_compare_chart(docs, base / "compare.png")
    if echo:
        print(text, flush=True)
    return docs, text, base
