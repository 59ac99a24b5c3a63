"""``cluster.meta_changes`` on a real in-process shard: the service that applies committed
changes (stale refusal, restart skip, a change cut short by a crash) and handlers run
through a one-node metadata group (the reply comes after the commit, effects only then)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from lurcher.cluster.config import decode_cluster
from lurcher.cluster.meta_changes import Change, MetaService, Outcome
from lurcher.cluster.metadata import start_node
from lurcher.core.meta import events as ev
from lurcher.core.meta.store import MetaStore
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.streams.create_stream import CreateStream
from lurcher.core.wire.requests.topics.create_topic import CreateTopic
from lurcher.core.wire.requests.topics.delete_topic import DeleteTopic
from tests.support.server import free_ports
from tests.unit.shard.harness import ShardHarness


def body(base: int, *events: ev.Event) -> bytes:
    return msgspec.msgpack.encode(Change(base, list(events)))


def outcome(result: bytes) -> Outcome:
    return msgspec.msgpack.decode(result, type=Outcome)


def service_of(harness: ShardHarness, store: MetaStore | None = None) -> MetaService:
    store = store or harness.shard.meta
    return MetaService(harness.shard, store, harness.shard.data_path / "meta-applied.json")


def test_a_change_on_the_current_base_is_recorded_a_stale_one_refused(tmp_path: Path) -> None:
    harness = ShardHarness(tmp_path)
    service = service_of(harness)
    assert outcome(service.apply(body(0, ev.StreamCreated(0, "a", 1)))) == Outcome(True, 1)
    assert outcome(service.apply(body(0, ev.StreamCreated(0, "b", 2)))) == Outcome(False, 1)
    assert [s.name for s in harness.shard.meta.state.streams.values()] == ["a"]


def test_after_a_restart_the_executed_changes_are_skipped(tmp_path: Path) -> None:
    harness = ShardHarness(tmp_path)
    service = service_of(harness)
    changes = [body(0, ev.StreamCreated(0, "a", 1)), body(0, ev.StreamCreated(0, "x", 1)),
               body(1, ev.StreamCreated(1, "b", 2))]
    for change in changes:
        service.apply(change)
    count = harness.shard.meta.events_count
    harness.shard.close()
    store = MetaStore(tmp_path / "state" / "log")
    again = MetaService(harness.shard, store, tmp_path / "meta-applied.json")
    assert [again.apply(change) for change in changes] == [b"", b"", b""]
    assert (store.events_count, again.accepted) == (count, 2)
    assert outcome(again.apply(body(2, ev.StreamCreated(2, "c", 3)))) == Outcome(True, 3)
    assert sorted(s.name for s in store.state.streams.values()) == ["a", "b", "c"]


def test_a_change_cut_short_by_a_crash_is_finished_not_repeated(tmp_path: Path) -> None:
    harness = ShardHarness(tmp_path)
    service = service_of(harness)
    first, second = ev.StreamCreated(0, "a", 1), ev.StreamCreated(1, "b", 1)
    service._mark(0, 2)  # the crash: after the mark and the first event, before the second
    harness.shard.meta.record(first)
    again = service_of(harness)
    assert outcome(again.apply(body(0, first, second))) == Outcome(True, 1)
    assert sorted(s.name for s in harness.shard.meta.state.streams.values()) == ["a", "b"]
    assert harness.shard.meta.events_count == 3  # root, a, b: nothing twice


@pytest.fixture
async def one_node(tmp_path: Path):
    harness = ShardHarness(tmp_path)
    port = free_ports(1)[0]
    config = decode_cluster({"enabled": True, "secret": "k", "node": {"current": {
        "name": "solo", "ip": "127.0.0.1", "replication_port": port}}})
    node = await start_node(config, harness.shard)
    yield harness
    await node.close()
    harness.shard.close()


async def test_a_handler_answers_once_its_change_is_committed_and_applied(one_node) -> None:
    harness = one_node
    session = await harness.login()
    stream = await harness.call(session, CreateStream("orders"))
    assert (stream.header.id, stream.header.name) == (0, "orders")
    topic = await harness.call(session, CreateTopic(
        Identifier.parse(0), 2, 1, 0, 0, 0, "created"))
    assert len(topic.partitions) == 2
    assert sorted(k for k in harness.shard.partitions) == [(0, 0, 0), (0, 0, 1)]
    assert harness.shard.cluster_node.groups[0].replica.commit == 2


async def test_a_refused_change_commits_nothing(one_node) -> None:
    harness = one_node
    session = await harness.login()
    await harness.call(session, CreateStream("orders"))
    status, _ = await harness.exchange(session, CreateStream("orders"))
    assert status != 0
    assert harness.shard.cluster_node.groups[0].replica.commit == 1


async def test_a_deletion_removes_files_only_when_applied(one_node) -> None:
    harness = one_node
    session = await harness.login()
    await harness.call(session, CreateStream("s"))
    await harness.call(session, CreateTopic(Identifier.parse(0), 1, 1, 0, 0, 0, "t"))
    path = harness.shard.partition_path(0, 0, 0)
    assert path.exists()
    await harness.call(session, DeleteTopic(Identifier.parse(0), Identifier.parse(0)))
    assert not path.exists() and harness.shard.partitions == {}
    assert not list((harness.shard.data_path / "streams" / "0" / "topics").iterdir())
