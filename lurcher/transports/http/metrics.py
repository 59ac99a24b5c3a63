"""Prometheus metrics served at ``[http.metrics].endpoint`` (default ``/metrics``).

``Metrics`` is an observer of the shard's dispatcher (``core.shard.observers``), registered
by the server at start (``observe_commands``) whether or not HTTP runs, so commands from
every front end are counted by name and outcome (``ok`` or the error's snake_case name) and
timed, including the awaited part of asynchronous handlers; only the scrape needs HTTP.
Codes outside the command table are counted as command "unknown", so a client cannot
create series at will. Per-partition message counts and sizes are read from the shard's
partitions at scrape time (no bookkeeping on the send path). On a cluster node the
``lurcher_cluster_*`` series are read from its ``ClusterNode`` at scrape time too
(``ClusterCollector``): per replication group the view, view changes, whether this node is
its primary, each replica's lag in ops where known, and the submit-to-commit time of the
changes this node submitted; and whether this node is the cluster's Leader. Each server has
its own registry, so several servers in one process never share series.

The endpoint needs no login (as Iggy's), and a rendering costs the event loop time in
proportion to the partitions (about 0.1 s for 5,000 of them). So an expensive rendering
(``REUSE_FROM_S`` or more) is answered again to scrapes that come within ``REUSE_FACTOR``
times its cost: however often clients scrape, rendering takes at most about a tenth of the
loop. A cheap one (a server with few partitions) is never reused, so a scrape right after a
command counts it. The cost is the loop thread's CPU time, not the time that passed: on a
busy machine the process may be preempted mid-rendering, which costs the loop nothing.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from lurcher.cluster.status import META_GROUP, LatencyTally, replica_lags

from lurcher.core.wire.commands import COMMANDS
from lurcher.core.wire.error_codes import ErrorCode

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
UNKNOWN_CODE = -1
REUSE_FROM_S = 0.005  # a rendering that took this long is reused ...
REUSE_FACTOR = 10     # ... for this many times its cost
LATENCY_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                     0.25, 0.5, 1.0, 2.5, 5.0)


def _outcome(status: int) -> str:
    """The outcome label: "ok", the error's snake_case name, or "error" (unknown status)."""
    if status == 0:
        return "ok"
    if status in ErrorCode._value2member_map_:
        return ErrorCode.of(status).snake_name
    return "error"


class PartitionCollector:
    """Scrape-time gauges over ``shard.partitions``."""

    def __init__(self, shard: Any) -> None:
        self.shard = shard

    def collect(self) -> Any:
        labels = ["stream_id", "topic_id", "partition_id"]
        messages = GaugeMetricFamily("lurcher_partition_messages",
                                     "Messages stored in a partition", labels=labels)
        sizes = GaugeMetricFamily("lurcher_partition_size_bytes",
                                  "Bytes stored in a partition", labels=labels)
        for (sid, tid, pid), partition in list(self.shard.partitions.items()):
            key = [str(sid), str(tid), str(pid)]
            messages.add_metric(key, partition.messages_count)
            sizes.add_metric(key, partition.size_bytes)
        yield messages
        yield sizes


class ClusterCollector:
    """Scrape-time series of ``shard.cluster_node`` (none while the node is not clustered)."""

    def __init__(self, shard: Any) -> None:
        self.shard = shard

    def collect(self) -> Any:
        node = getattr(self.shard, "cluster_node", None)  # a shard of any kind
        if node is None:
            return
        g = ["group"]
        view = GaugeMetricFamily("lurcher_cluster_view", "Current view of a group", labels=g)
        changes = CounterMetricFamily("lurcher_cluster_view_changes",
                                      "View changes this node saw in a group", labels=g)
        primary = GaugeMetricFamily("lurcher_cluster_primary",
                                    "1 when this node is the group's primary", labels=g)
        lag = GaugeMetricFamily("lurcher_cluster_replica_lag_ops",
                                "Ops a replica is behind the primary's commit (where known)",
                                labels=["group", "node"])
        commit = HistogramMetricFamily("lurcher_cluster_commit_duration_seconds",
                                       "Submit-to-commit time on this node", labels=g)
        for group, state in sorted(node.groups.items()):
            key, replica = [str(group)], state.replica
            names = [node.config.names[m] for m in state.members]
            view.add_metric(key, replica.view)
            changes.add_metric(key, state.view_changes)
            primary.add_metric(key, int(node.leader(group) == node.index))
            for index, ops in enumerate(replica_lags(replica, state.primary_commit)):
                if ops is not None:
                    lag.add_metric([str(group), names[index]], ops)
            commit.add_metric(key, _buckets(state.commit_times), state.commit_times.total_s)
        leader = GaugeMetricFamily("lurcher_cluster_leader",
                                   "1 when this node is the cluster's Leader (metadata primary)")
        leader.add_metric([], int(node.leader(META_GROUP) == node.index))
        yield from (view, changes, primary, lag, commit, leader)


class CommandCollector:
    """Scrape-time series of the commands ``Metrics`` tallied: ``lurcher_commands_total`` by
    name and outcome, ``lurcher_command_duration_seconds`` by name."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Any:
        counts = CounterMetricFamily("lurcher_commands", "Commands handled, by name and outcome",
                                     labels=["command", "outcome"])
        latency = HistogramMetricFamily("lurcher_command_duration_seconds",
                                        "Command latency in seconds", labels=["command"])
        by_outcome: dict[tuple[str, str], int] = {}
        by_name: dict[str, LatencyTally] = {}
        for (code, status), tally in list(self.metrics.tallies.items()):
            name = self.metrics.name_of(code)
            key = (name, _outcome(status))
            by_outcome[key] = by_outcome.get(key, 0) + tally.count
            by_name.setdefault(name, LatencyTally(LATENCY_BUCKETS_S)).add(tally)
        for labels, count in sorted(by_outcome.items()):
            counts.add_metric(list(labels), count)
        for name, tally in sorted(by_name.items()):
            latency.add_metric([name], _buckets(tally), tally.total_s)
        yield counts
        yield latency


def _buckets(tally: Any) -> list[tuple[str, float]]:
    """Cumulative (upper bound, count) pairs of a ``LatencyTally``, ending with +Inf."""
    bounds = [*(repr(b) for b in tally.buckets), "+Inf"]
    total, pairs = 0, []
    for bound, count in zip(bounds, tally.counts):
        total += count
        pairs.append((bound, total))
    return pairs


class Metrics:
    """The server's registry. Commands are tallied per (code, status) in plain Python
    objects, one dict lookup and a bucket search a request (the prometheus_client
    counter and histogram cost about 4.6 us a request, as much as the rest of a ping's path),
    and turned into series at scrape time (``CommandCollector``)."""

    def __init__(self, shard: Any, clock: Callable[[], float] = time.monotonic,
                 work_clock: Callable[[], float] = time.thread_time) -> None:
        """``clock`` times the reuse of a rendering; ``work_clock`` measures what a rendering
        cost the event loop (its thread's CPU time: a process preempted mid-rendering on a
        busy machine must not make a cheap rendering look expensive)."""
        self.clock, self.work_clock = clock, work_clock
        self._rendered = b""
        self._reuse_until = float("-inf")
        self.registry = CollectorRegistry()
        self.http_requests = Counter("lurcher_http_requests", "HTTP requests by status",
                                     ["method", "status"], registry=self.registry)
        self.registry.register(PartitionCollector(shard))
        self.registry.register(ClusterCollector(shard))
        self.registry.register(CommandCollector(self))
        self._names = {code: spec.name for code, spec in COMMANDS.items()}
        # (code, status) -> tally. Codes outside the command table share one "unknown"
        # series (clients choose codes).
        self.tallies: dict[tuple[int, int], LatencyTally] = {}

    def name_of(self, code: int) -> str:
        return self._names.get(code, "unknown")

    def render(self) -> bytes:
        """The exposition text; an expensive one is reused for a while (module docstring)."""
        started = self.clock()
        if started < self._reuse_until:
            return self._rendered
        work_started = self.work_clock()
        self._rendered = generate_latest(self.registry)
        cost = self.work_clock() - work_started
        self._reuse_until = started + REUSE_FACTOR * cost if cost >= REUSE_FROM_S \
            else float("-inf")
        return self._rendered

    def on_command(self, code: int, status: int, duration_s: float) -> None:
        """The dispatcher observer (``core.shard.observers``): count and time one request."""
        key = (code if code in self._names else UNKNOWN_CODE, status)
        tally = self.tallies.get(key)
        if tally is None:
            tally = self.tallies[key] = LatencyTally(LATENCY_BUCKETS_S)
        tally.observe(duration_s)


def observe_commands(shard: Any, enabled: bool) -> Metrics | None:
    """The shard's Metrics, registered as an observer of its dispatcher (None: disabled).
    Called by the server at start, whichever front ends run."""
    if not enabled:
        return None
    metrics = registered_metrics(shard)
    if metrics is None:
        metrics = Metrics(shard)
        shard.dispatcher.add_observer(metrics)
    return metrics


def registered_metrics(shard: Any) -> Metrics | None:
    """The Metrics observing ``shard``'s dispatcher, if any."""
    for observer in shard.dispatcher.observers:
        if isinstance(observer, Metrics):
            return observer
    return None
