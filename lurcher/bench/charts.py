"""PNG charts of one run (matplotlib, Agg backend), written only when matplotlib is installed.

``throughput.png``: total and per-actor MB/s over time. ``latency.png``: per-role latency
percentiles (p50 ... p99.99, max) on a log scale. ``server.png``: server CPU% and RSS over
time (when monitored). ``compare.png``: msg/s and p99 per target for a compare run.
"""

from __future__ import annotations

from pathlib import Path

from lurcher.bench.metrics import PERCENTILES

PERCENTILE_LABELS = ["p50", "p90", "p95", "p99", "p99.9", "p99.99", "max"]


def _pyplot():
    """matplotlib.pyplot on the Agg backend, or None when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def available() -> bool:
    return _pyplot() is not None


def _title(doc: dict) -> str:
    p = doc["params"]
    return (f"{doc['workload']} on {doc['target']}: {p['message_size']} B x "
            f"{p['messages_per_batch']} msgs/batch")


def throughput(plt, doc: dict, path: Path) -> None:
    ts = doc["time_series"]
    fig, ax = plt.subplots(figsize=(10, 5))
    ax.plot(ts["time_s"], ts["total_megabytes_per_second"], label="total", linewidth=2)
    for a in ts["actors"]:
        ax.plot(ts["time_s"], a["megabytes_per_second"], linewidth=0.8, alpha=0.7,
                label=f"{a['actor_kind']} {a['actor_id']}")
    ax.set(xlabel="time (s)", ylabel="MB/s", title=f"Throughput - {_title(doc)}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def latency(plt, doc: dict, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(10, 5))
    for g in doc["groups"]:
        values = [g[f"{k}_latency_ms"] for k in PERCENTILES] + [g["max_latency_ms"]]
        ax.plot(PERCENTILE_LABELS, values, marker="o", label=f"{g['kind']}s")
    ax.set_yscale("log")
    ax.set(xlabel="percentile", ylabel="latency per batch (ms)",
           title=f"Latency - {_title(doc)}")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def server(plt, doc: dict, path: Path) -> None:
    samples = doc["server"]["samples"]
    fig, ax = plt.subplots(figsize=(10, 4))
    t = [s[0] for s in samples]
    ax.plot(t, [s[1] for s in samples], color="tab:red", label="CPU %")
    ax.set(xlabel="time (s)", ylabel="CPU % (100 = one core)", title=f"Server - {_title(doc)}")
    ax2 = ax.twinx()
    ax2.plot(t, [s[2] / (1 << 20) for s in samples], color="tab:blue", label="RSS MiB")
    ax2.set_ylabel("RSS (MiB)")
    fig.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_run_charts(doc: dict, directory: Path) -> list[Path]:
    """The PNGs of one run in ``directory`` (empty list without matplotlib)."""
    plt = _pyplot()
    if plt is None:
        return []
    out = [directory / "throughput.png", directory / "latency.png"]
    throughput(plt, doc, out[0])
    latency(plt, doc, out[1])
    if doc["server"]["samples"]:
        out.append(directory / "server.png")
        server(plt, doc, out[-1])
    return out


def write_compare_chart(docs: dict[str, dict], path: Path) -> Path | None:
    """Bars of total msg/s and pooled p99 per target."""
    plt = _pyplot()
    if plt is None:
        return None
    names = list(docs)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    a1.bar(names, [docs[n]["total"]["total_throughput_messages_per_second"] for n in names])
    a1.set(title="throughput (msg/s, higher is better)")
    a2.bar(names, [docs[n]["total"]["p99_latency_ms"] for n in names], color="tab:orange")
    a2.set(title="p99 latency per batch (ms, lower is better)")
    fig.suptitle(next(iter(docs.values()))["workload"])
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
