"""Per-batch records -> summaries (Iggy's field names) and time series, with numpy.

Latency percentiles are numpy percentiles over per-batch round-trip times (linear
interpolation); a role's or the run's percentiles pool every batch of its actors. Throughput
of an actor = its messages / its own measured time; a role's total is the sum over its
actors (as iggy-bench sums), and the run total sums the roles. MB = 10^6 bytes of payload
(``total_bytes`` adds the 64-byte message headers). Time series bucket batch completions
into ``sampling_s`` slots from the first actor's start.
"""

from __future__ import annotations

import numpy as np

from lurcher.bench.actor import ActorResult
from lurcher.bench.options import BenchOptions

HEADER_BYTES = 64
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p999": 99.9,
               "p9999": 99.99}


class Records:
    """The numpy view of one actor's result."""

    def __init__(self, r: ActorResult) -> None:
        self.spec = r.spec
        self.start, self.end = r.start, r.end
        self.done_at = np.frombuffer(r.done_at, dtype=np.float64)
        self.latency_s = np.frombuffer(r.latency_s, dtype=np.float64)
        self.messages = np.frombuffer(r.messages, dtype=np.int64)

    @property
    def seconds(self) -> float:
        return max(self.end - self.start, 1e-9)


def latency_summary(latency_s: np.ndarray) -> dict[str, float]:
    """avg/median/min/max/std and the percentiles, in milliseconds (zeros when empty)."""
    ms = latency_s * 1e3
    if ms.size == 0:
        keys = [f"{k}_latency_ms" for k in PERCENTILES] + [
            "avg_latency_ms", "median_latency_ms", "min_latency_ms", "max_latency_ms",
            "std_dev_latency_ms"]
        return dict.fromkeys(keys, 0.0)
    values = np.percentile(ms, list(PERCENTILES.values()))
    out = {f"{k}_latency_ms": float(v) for k, v in zip(PERCENTILES, values)}
    out.update(avg_latency_ms=float(ms.mean()), median_latency_ms=float(np.median(ms)),
               min_latency_ms=float(ms.min()), max_latency_ms=float(ms.max()),
               std_dev_latency_ms=float(ms.std()))
    return out


def actor_summary(rec: Records, o: BenchOptions) -> dict:
    messages = int(rec.messages.sum())
    user = messages * o.message_size
    return {
        "actor_kind": rec.spec.role, "actor_id": rec.spec.actor_id,
        "stream": rec.spec.stream, "total_time_secs": rec.seconds,
        "total_user_data_bytes": user, "total_bytes": user + messages * HEADER_BYTES,
        "total_messages": messages, "total_message_batches": int(rec.messages.size),
        "throughput_megabytes_per_second": user / 1e6 / rec.seconds,
        "throughput_messages_per_second": messages / rec.seconds,
        **latency_summary(rec.latency_s),
    }


def group_summary(kind: str, recs: list[Records], summaries: list[dict]) -> dict:
    pooled = np.concatenate([r.latency_s for r in recs]) if recs else np.empty(0)
    mb = [s["throughput_megabytes_per_second"] for s in summaries]
    msgs = [s["throughput_messages_per_second"] for s in summaries]
    return {
        "kind": kind, "actors": len(recs),
        "total_messages": sum(s["total_messages"] for s in summaries),
        "total_throughput_megabytes_per_second": float(sum(mb)),
        "total_throughput_messages_per_second": float(sum(msgs)),
        "average_throughput_megabytes_per_second": float(np.mean(mb)) if mb else 0.0,
        "average_throughput_messages_per_second": float(np.mean(msgs)) if msgs else 0.0,
        **latency_summary(pooled),
    }


def time_series(recs: list[Records], t0: float, sampling_s: float,
                message_size: int) -> dict:
    """Per-bucket throughput (MB/s, msg/s) per actor and in total, and mean latency (ms)."""
    end = max((r.end for r in recs), default=t0)
    buckets = max(1, int(np.ceil((end - t0) / sampling_s)))
    times = (np.arange(buckets) + 1) * sampling_s
    per_actor, total = [], np.zeros(buckets)
    for r in recs:
        idx = np.clip(((r.done_at - t0) / sampling_s).astype(np.int64), 0, buckets - 1)
        counts = np.bincount(idx, weights=r.messages, minlength=buckets)
        lat_sum = np.bincount(idx, weights=r.latency_s, minlength=buckets)
        n = np.bincount(idx, minlength=buckets)
        total += counts
        per_actor.append({
            "actor_kind": r.spec.role, "actor_id": r.spec.actor_id,
            "messages_per_second": (counts / sampling_s).tolist(),
            "megabytes_per_second": (counts * message_size / 1e6 / sampling_s).tolist(),
            "latency_ms": np.where(n > 0, lat_sum / np.maximum(n, 1) * 1e3, np.nan).tolist(),
        })
    return {"sampling_s": sampling_s, "time_s": times.tolist(), "actors": per_actor,
            "total_messages_per_second": (total / sampling_s).tolist(),
            "total_megabytes_per_second": (total * message_size / 1e6 / sampling_s).tolist()}


def summarize(results: list[ActorResult], o: BenchOptions) -> dict:
    """actors / groups / total summaries and the time series of one run."""
    recs = [Records(r) for r in results]
    t0 = min((r.start for r in recs), default=0.0)
    actors = [actor_summary(r, o) for r in recs]
    kinds = sorted({r.spec.role for r in recs}, key=[r.spec.role for r in recs].index)
    groups = [group_summary(k, [r for r in recs if r.spec.role == k],
                            [s for s in actors if s["actor_kind"] == k]) for k in kinds]
    total = group_summary("total", recs, actors)
    return {"t0": t0, "actors": actors, "groups": groups, "total": total,
            "time_series": time_series(recs, t0, o.sampling_s, o.message_size)}
