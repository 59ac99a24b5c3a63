"""lurcher-bench end to end: every workload against its own lurcher server, and a compare run
against lurcher, Redis, NATS and RabbitMQ Streams (nats-server, redis-server and rabbitmq-server
must be installed: CI installs
them with apt; nothing here is skipped). Tiny counts keep each run to a few seconds."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from lurcher.bench import servers
from lurcher.bench.cli import main
from lurcher.bench.workloads import WORKLOADS

TINY = ["--message-batches", "2", "--messages-per-batch", "10", "--message-size", "100",
        "--no-progress"]
SHAPES = {  # extra options per workload: more than one actor/partition where it matters
    "pinned-producer": ["--producers", "2"],
    "pinned-consumer": ["--consumers", "2"],
    "pinned-producer-and-consumer": [],
    "balanced-producer": ["--producers", "2", "--partitions", "3"],
    "balanced-consumer-group": ["--consumers", "2", "--partitions", "3"],
    "balanced-producer-and-consumer-group": ["--consumers", "2", "--partitions", "2"],
    "end-to-end-producing-consumer": [],
}
PNGS = ("throughput.png", "latency.png", "server.png")


def only_result(out: Path) -> dict:
    (path,) = out.glob("*/result.json")
    for png in PNGS:
        assert (path.parent / png).stat().st_size > 1000, png
    return json.loads(path.read_text())


def expected_total(workload: str) -> int:
    """Messages the whole run handles with TINY and SHAPES (2 batches x 10 messages)."""
    per_actor = 2 * 10
    return {"pinned-producer": 2, "pinned-consumer": 2, "pinned-producer-and-consumer": 2,
            "balanced-producer": 2, "balanced-consumer-group": 2,
            "balanced-producer-and-consumer-group": 2,
            "end-to-end-producing-consumer": 1}[workload] * per_actor


def test_shapes_cover_every_workload() -> None:
    assert set(SHAPES) == set(WORKLOADS)


@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_workload_runs_against_lurcher(workload: str, tmp_path: Path, capsys) -> None:
    assert main([workload, "--output-dir", str(tmp_path), *TINY, *SHAPES[workload]]) == 0
    printed = capsys.readouterr().out
    assert f"lurcher-bench {workload} on lurcher (tcp)" in printed
    assert "p99.9" in printed and "server: CPU avg" in printed
    doc = only_result(tmp_path)
    assert doc["workload"] == workload and doc["target"] == "lurcher"
    assert doc["total"]["total_messages"] == expected_total(workload)
    assert doc["total"]["total_throughput_messages_per_second"] > 0
    for actor in doc["actors"]:
        assert actor["total_message_batches"] >= 1
        assert 0 < actor["p50_latency_ms"] <= actor["p99_latency_ms"] <= actor["max_latency_ms"]
    assert doc["server"]["rss_bytes_max"] > 0 and doc["server"]["samples"]
    assert doc["time_series"]["total_megabytes_per_second"]


@pytest.mark.system("nats-server", "redis-server", "rabbitmq-server")
@pytest.mark.parametrize("workload", ["end-to-end-producing-consumer",
                                      "balanced-producer-and-consumer-group"])
def test_compare_runs_lurcher_and_every_peer(workload: str, tmp_path: Path, capsys) -> None:
    args = ["compare", workload, "--output-dir", str(tmp_path), *TINY]
    if workload.startswith("balanced"):
        args += ["--partitions", "2", "--consumers", "2"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert f"compare {workload}" in printed
    assert all(f"lurcher/{peer}" in printed for peer in ("redis", "nats", "rabbitmq"))
    (cdir,) = tmp_path.glob("compare_*")
    assert (cdir / "compare.png").stat().st_size > 1000
    summary = json.loads((cdir / "compare.json").read_text())
    assert set(summary["targets"]) == {"lurcher", "redis", "nats", "rabbitmq"}
    for target in ("lurcher", "redis", "nats", "rabbitmq"):
        doc = json.loads((cdir / target / "result.json").read_text())
        assert doc["total"]["total_messages"] == (20 if workload.startswith("end") else 40)
        for png in PNGS:
            assert (cdir / target / png).exists()


@pytest.mark.parametrize("transport", ["ws", "quic", "http"])
@pytest.mark.parametrize("workload", ["pinned-producer", "pinned-consumer"])
def test_workloads_run_over_every_transport(workload: str, transport: str, tmp_path: Path,
                                            capsys) -> None:
    assert main([workload, "--transport", transport, "--output-dir", str(tmp_path), *TINY,
                 *SHAPES[workload]]) == 0
    assert f"lurcher-bench {workload} on lurcher ({transport})" in capsys.readouterr().out
    doc = only_result(tmp_path)
    assert doc["total"]["total_messages"] == expected_total(workload)


@pytest.mark.parametrize("workload", ["pinned-producer", "pinned-consumer"])
def test_official_client_target_runs_pinned_workloads(workload: str, tmp_path: Path,
                                                      capsys) -> None:
    assert main([workload, "--target", "iggy-py", "--output-dir", str(tmp_path), *TINY,
                 *SHAPES[workload]]) == 0
    assert f"lurcher-bench {workload} on iggy-py (tcp)" in capsys.readouterr().out
    assert only_result(tmp_path)["total"]["total_messages"] == expected_total(workload)


def test_missing_peer_binary_names_the_apt_package(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(servers.shutil, "which", lambda name: None)
    assert main(["pinned-producer", "--target", "nats", "--output-dir", str(tmp_path),
                 *TINY]) == 1
    err = capsys.readouterr().err
    assert "apt-get install -y nats-server" in err


def test_bad_options_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["pinned-producer", "--streams", "3", "--output-dir", str(tmp_path)]) == 2
    assert main(["no-such-workload", "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "must equal --producers" in err and "unknown workload" in err


def test_compare_puts_a_single_node_beside_a_three_node_cluster(tmp_path: Path, capsys) -> None:
    targets = {"lurcher": ("lurcher", 0), "lurcher-cluster-rf1": ("lurcher-cluster", 1),
               "lurcher-cluster-rf3": ("lurcher-cluster", 3)}
    assert main(["compare", "pinned-producer", "--targets", "lurcher", "lurcher-cluster:1",
                 "lurcher-cluster:3", "--output-dir", str(tmp_path), *TINY,
                 *SHAPES["pinned-producer"]]) == 0
    printed = capsys.readouterr().out
    assert "lurcher/lurcher-cluster-rf1" in printed and "lurcher/lurcher-cluster-rf3" in printed
    (cdir,) = tmp_path.glob("compare_*")
    assert set(json.loads((cdir / "compare.json").read_text())["targets"]) == set(targets)
    for label, (target, factor) in targets.items():
        doc = json.loads((cdir / label / "result.json").read_text())
        assert (doc["target"], doc["params"]["replication_factor"]) == (target, factor)
        assert doc["total"]["total_messages"] == expected_total("pinned-producer")


async def test_the_bench_cluster_has_three_nodes_and_topics_of_the_factor_asked() -> None:
    from lurcher.bench.cluster import node_address
    from lurcher.bench.drivers.lurcher import client, prepare
    from lurcher.bench.options import BenchOptions
    from lurcher.bench.workloads import TOPIC, layout, stream_name
    options = BenchOptions(workload="pinned-producer", producers=3,
                           replication_factor=3).validate()
    cluster = await asyncio.to_thread(servers.start, "lurcher-cluster")
    try:
        addresses = cluster.address.split(",")
        assert len(set(addresses)) == 3
        assert [node_address(cluster.address, i) for i in range(4)] == [*addresses, addresses[0]]
        await prepare(cluster.address, options, layout(options))
        for address in addresses:  # the topic reached every node, with its factor
            c = client(address, options)
            async with c:
                topic = await c.get_topic(stream_name(1), TOPIC)
            assert topic is not None and topic.header.replication_factor == 3
    finally:
        cluster.stop()
    assert not cluster.data_dir.exists()


def test_bad_replication_options_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["compare", "pinned-producer", "--targets", "redis:3",
                 "--output-dir", str(tmp_path)]) == 2
    assert main(["pinned-producer", "--target", "nats", "--replication-factor", "3",
                 "--output-dir", str(tmp_path)]) == 2
    assert main(["compare", "pinned-producer", "--targets", "lurcher-cluster:x",
                 "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "needs a lurcher target" in err and "lurcher targets only" in err
    assert "TARGET:REPLICATION_FACTOR" in err
