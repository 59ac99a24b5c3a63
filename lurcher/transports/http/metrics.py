"""Prometheus metrics served at ``[http.metrics].endpoint`` (default ``/metrics``).

``Metrics.instrument(dispatcher)`` wraps the shard's ``Dispatcher.dispatch`` and
``execute`` (every transport goes through them), counting each command by name and outcome
(``ok`` or the error's snake_case name) and observing its latency, including the awaited part
of asynchronous handlers. Per-partition message counts and sizes are read from the shard's
partitions at scrape time (no bookkeeping on the send path). Each server has its own
registry, so several servers in one process never share series.
"""

from __future__ import annotations

import inspect
import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

from lurcher.core.wire.commands import COMMANDS
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                     0.25, 0.5, 1.0, 2.5, 5.0)


def _outcome(exc: BaseException) -> str:
    if isinstance(exc, IggyError):
        code = exc.status
        return ErrorCode.of(code).snake_name if code in ErrorCode._value2member_map_ else "error"
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


class Metrics:
    def __init__(self, shard: Any) -> None:
        self.registry = CollectorRegistry()
        self.commands = Counter("lurcher_commands", "Commands handled, by name and outcome",
                                ["command", "outcome"], registry=self.registry)
        self.latency = Histogram("lurcher_command_duration_seconds",
                                 "Command latency in seconds", ["command"],
                                 buckets=LATENCY_BUCKETS_S, registry=self.registry)
        self.http_requests = Counter("lurcher_http_requests", "HTTP requests by status",
                                     ["method", "status"], registry=self.registry)
        self.registry.register(PartitionCollector(shard))
        self._names = {code: spec.name for code, spec in COMMANDS.items()}

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def observe(self, code: int, started: float, outcome: str) -> None:
        name = self._names.get(code, str(code))
        self.commands.labels(name, outcome).inc()
        self.latency.labels(name).observe(time.perf_counter() - started)

    def instrument(self, dispatcher: Any) -> None:
        """Wrap ``dispatcher.dispatch``/``execute`` on the instance (idempotent)."""
        if getattr(dispatcher, "_metrics", None) is self:
            return
        dispatch, execute = dispatcher.dispatch, dispatcher.execute

        def timed_dispatch(session: Any, code: int, *args: Any, **kwargs: Any) -> Any:
            return self._timed(code, dispatch, session, code, *args, **kwargs)

        def timed_execute(session: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
            return self._timed(type(request).CODE, execute, session, request, *args, **kwargs)

        dispatcher.dispatch, dispatcher.execute = timed_dispatch, timed_execute
        dispatcher._metrics = self

    def _timed(self, code: int, fn: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            self.observe(code, started, _outcome(exc))
            raise
        if inspect.isawaitable(result):
            return self._finish(code, started, result)
        self.observe(code, started, "ok")
        return result

    async def _finish(self, code: int, started: float, pending: Any) -> Any:
        try:
            result = await pending
        except BaseException as exc:
            self.observe(code, started, _outcome(exc))
            raise
        self.observe(code, started, "ok")
        return result
