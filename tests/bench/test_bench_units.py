"""lurcher-bench pieces without servers: plans, option checks, metrics, tables."""

from __future__ import annotations

from array import array

import numpy as np
import pytest

from lurcher.bench.actor import ActorResult
from lurcher.bench.metrics import summarize
from lurcher.bench.options import BenchOptions, BenchOptionsError
from lurcher.bench.report import table
from lurcher.bench.workloads import (
    CONSUMER,
    PRODUCER,
    PRODUCING_CONSUMER,
    layout,
    plan,
    seed_plan,
    workload,
)


def opts(name: str, **kw) -> BenchOptions:
    return BenchOptions(workload=name, **kw).validate()


def test_pinned_producer_one_stream_per_producer() -> None:
    specs = plan(opts("pinned-producer", producers=3))
    assert [(s.role, s.stream, s.partition) for s in specs] == [
        (PRODUCER, 1, 0), (PRODUCER, 2, 0), (PRODUCER, 3, 0)]


def test_pinned_consumer_is_seeded_and_reads_its_batches() -> None:
    o = opts("pinned-consumer", consumers=2, message_batches=5, messages_per_batch=10)
    assert [s.target_messages for s in plan(o)] == [50, 50]
    assert [(s.role, s.stream) for s in seed_plan(o)] == [(PRODUCER, 1), (PRODUCER, 2)]


def test_balanced_group_targets_sum_what_was_produced() -> None:
    o = opts("balanced-producer-and-consumer-group", producers=3, consumers=2, streams=1,
             partitions=4, message_batches=2, messages_per_batch=10)
    specs = plan(o)
    assert [s.partition for s in specs if s.role == PRODUCER] == [None] * 3
    groups = [s for s in specs if s.role == CONSUMER]
    assert {(s.group, s.target_messages) for s in groups} == {(1, 60)}
    assert layout(o).partitions == 4 and layout(o).groups


def test_end_to_end_uses_producing_consumers() -> None:
    specs = plan(opts("e2e", producers=2))
    assert {s.role for s in specs} == {PRODUCING_CONSUMER}
    assert workload("e2e").name == "end-to-end-producing-consumer"


@pytest.mark.parametrize("bad", [dict(producers=0), dict(message_batches=1, duration_s=1.0),
                                 dict(transport="smoke-signals"), dict(target="kafka"),
                                 dict(transport="tcp", connection_options={"initial_mtu": "1200"})])
def test_invalid_options(bad: dict) -> None:
    with pytest.raises(BenchOptionsError):
        opts("pinned-producer", **bad)


def test_connection_options_of_the_transport_are_accepted() -> None:
    o = opts("pinned-producer", transport="quic", connection_options={"initial_mtu": "1200"})
    assert o.connection_options == {"initial_mtu": "1200"}


def test_defaults_to_1000_batches() -> None:
    assert opts("pinned-producer").message_batches == 1000
    assert opts("pinned-producer", duration_s=2.0).message_batches is None


def test_summary_percentiles_and_table() -> None:
    o = opts("pinned-producer", message_batches=100, messages_per_batch=10, message_size=100)
    (spec,) = plan(o)
    lat = np.arange(1, 101, dtype=np.float64) / 1000  # 1..100 ms
    done = 10.0 + np.arange(100) * 0.01
    result = ActorResult(spec, 10.0, 11.0, done.tobytes(), lat.tobytes(),
                         array("q", [10] * 100).tobytes())
    s = summarize([result], o)
    a = s["actors"][0]
    assert a["total_messages"] == 1000 and a["throughput_messages_per_second"] == 1000.0
    assert a["throughput_megabytes_per_second"] == pytest.approx(0.1)
    assert a["p50_latency_ms"] == pytest.approx(50.5)
    assert a["p99_latency_ms"] == pytest.approx(99.01)
    assert a["max_latency_ms"] == pytest.approx(100.0)
    assert sum(s["time_series"]["total_messages_per_second"]) * 0.1 == pytest.approx(1000)
    doc = {"params": {"message_batches": 100, "duration_s": None, "transport": "tcp",
                      "message_size": 100, "messages_per_batch": 10},
           "workload": o.workload, "target": "lurcher", "server": {}, **s}
    text = table(doc)
    assert "producer 1" in text and "producers (sum)" in text and "not monitored" in text
