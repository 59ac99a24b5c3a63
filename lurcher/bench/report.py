"""The result document of one run (JSON) and its text tables.

``result.json`` holds: ``params`` (every option), ``target``, ``workload``, ``host`` (machine,
Python, system, ``free_page_reporting``: see ``core.log.host_memory``), ``server`` (pid,
CPU percent avg/max, RSS max and after setup, samples), ``actors`` / ``groups`` / ``total``
summaries (field names as iggy-bench: ``throughput_megabytes_per_second``,
``p99_latency_ms``, ...), and ``time_series``. NaN (an empty bucket) is written as null.
"""

from __future__ import annotations

import platform
import time
from pathlib import Path

import msgspec
import numpy as np

from lurcher.bench.options import BenchOptions
from lurcher.core.log.host_memory import free_page_reporting

MIB = 1 << 20
RESULT_FILE = "result.json"
REPORTING_NOTE = ("machine: a VM that reports free memory to its host (virtio balloon free "
                  "page reporting); writes into freshly freed memory are slower and vary "
                  "from run to run, see README, Performance, drop-behind")


def server_section(pid: int | None, samples: list[tuple[float, float, int]], t0: float,
                   rss_after_setup: int | None, notes: list[str]) -> dict:
    cpu = np.array([s[1] for s in samples], dtype=np.float64)
    rss = np.array([s[2] for s in samples], dtype=np.int64)
    return {
        "pid": pid, "notes": notes,
        "cpu_percent_avg": float(cpu.mean()) if cpu.size else None,
        "cpu_percent_max": float(cpu.max()) if cpu.size else None,
        "rss_bytes_max": int(rss.max()) if rss.size else None,
        "rss_bytes_avg": int(rss.mean()) if rss.size else None,
        "rss_bytes_after_setup": rss_after_setup,
        "samples": [[s[0] - t0, s[1], s[2]] for s in samples],
    }


def document(o: BenchOptions, summary: dict, server: dict) -> dict:
    return {
        "params": msgspec.structs.asdict(o), "target": o.target, "workload": o.workload,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": {"machine": platform.machine(), "python": platform.python_version(),
                 "system": platform.platform(), "free_page_reporting": free_page_reporting()},
        "server": server, **{k: v for k, v in summary.items() if k != "t0"},
    }


def run_name(o: BenchOptions) -> str:
    """Directory name of a run: workload, target, actors, sizes, volume, transport."""
    volume = f"{o.message_batches}b" if o.message_batches else f"{o.duration_s:g}s"
    return "_".join([o.workload, o.target, f"{o.producers}p{o.consumers}c",
                     f"{o.message_size}B", f"{o.messages_per_batch}mpb", volume, o.transport])


def write(doc: dict, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / RESULT_FILE
    path.write_bytes(msgspec.json.format(msgspec.json.encode(doc), indent=2))
    return path


def _fmt_int(v: float) -> str:
    return f"{v:,.0f}"


COLUMNS = [("actor", 26, None), ("msgs", 11, "total_messages"),
           ("MB/s", 9, "throughput_megabytes_per_second"),
           ("msg/s", 11, "throughput_messages_per_second"),
           ("avg ms", 8, "avg_latency_ms"), ("p50", 8, "p50_latency_ms"),
           ("p90", 8, "p90_latency_ms"), ("p95", 8, "p95_latency_ms"),
           ("p99", 8, "p99_latency_ms"), ("p99.9", 8, "p999_latency_ms"),
           ("p99.99", 8, "p9999_latency_ms"), ("max", 8, "max_latency_ms")]


def _row(label: str, s: dict) -> str:
    cells = [label.ljust(COLUMNS[0][1])]
    for _, width, key in COLUMNS[1:]:
        v = s.get(key) or 0
        text = _fmt_int(v) if key in ("total_messages", "throughput_messages_per_second") \
            else f"{v:.3f}" if key.endswith("_ms") else f"{v:.1f}"
        cells.append(text.rjust(width))
    return " ".join(cells)


def _group_view(g: dict) -> dict:
    return {**g, "throughput_megabytes_per_second": g["total_throughput_megabytes_per_second"],
            "throughput_messages_per_second": g["total_throughput_messages_per_second"]}


def table(doc: dict) -> str:
    """The per-actor, per-role and total table of one run, plus the server line."""
    p = doc["params"]
    volume = (f"{p['message_batches']} batches" if p["message_batches"]
              else f"{p['duration_s']:g}s")
    lines = [f"lurcher-bench {doc['workload']} on {doc['target']} ({p['transport']}): "
             f"{p['message_size']} B x {p['messages_per_batch']} msgs/batch, {volume}",
             " ".join(name.rjust(w) if i else name.ljust(w)
                      for i, (name, w, _) in enumerate(COLUMNS))]
    for a in doc["actors"]:
        lines.append(_row(f"{a['actor_kind']} {a['actor_id']}", a))
    for g in doc["groups"]:
        lines.append(_row(f"{g['kind']}s (sum)", _group_view(g)))
    if len(doc["groups"]) > 1:
        lines.append(_row("total", _group_view(doc["total"])))
    lines.append(server_line(doc["server"]))
    if doc.get("host", {}).get("free_page_reporting"):
        lines.append(REPORTING_NOTE)
    return "\n".join(lines)


def server_line(s: dict) -> str:
    if s.get("cpu_percent_avg") is None:
        return "server: not monitored"
    text = (f"server: CPU avg {s['cpu_percent_avg']:.0f}% max {s['cpu_percent_max']:.0f}% "
            f"(100% = one core), RSS max {s['rss_bytes_max'] / MIB:.1f} MiB")
    if s.get("rss_bytes_after_setup"):
        text += f", after setup {s['rss_bytes_after_setup'] / MIB:.1f} MiB"
    for note in s.get("notes") or []:
        text += f"; {note}"
    return text
