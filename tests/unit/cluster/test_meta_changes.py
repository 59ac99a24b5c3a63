"""``cluster.meta_changes`` on a real in-process shard: the service that applies committed
changes (stale refusal, restart skip, a change cut short by a crash) and handlers run
through a one-node metadata group (the reply comes after the commit, effects only then)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import pytest

from lurcher.cluster.config import decode_cluster
from lurcher.cluster.meta_changes import Change, MetaService, Outcome
from lurcher.cluster.metadata import start_node
from lurcher.core.meta import events as ev
from lurcher.core.meta.store import MetaLogCorrupt, MetaStore
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


def log_size(data: Path) -> int:
    return (data / "state" / "log").stat().st_size


async def service_of(harness: ShardHarness, store: MetaStore | None = None) -> MetaService:
    service = MetaService(harness.shard, store or harness.shard.meta,
                          harness.shard.data_path / "meta-applied.json")
    await service.open()
    return service


async def settled(service: MetaService) -> None:
    """Wait until the service has carried out every change it accepted."""
    while service.runner is not None and not service.runner.done():
        await service.runner


async def test_a_change_on_the_current_base_is_recorded_a_stale_one_refused(
        tmp_path: Path) -> None:
    harness = ShardHarness(tmp_path)
    service = await service_of(harness)
    assert outcome(service.apply(body(0, ev.StreamCreated(0, "a", 1)))) == Outcome(True, 1)
    assert outcome(service.apply(body(0, ev.StreamCreated(0, "b", 2)))) == Outcome(False, 1)
    assert [s.name for s in harness.shard.meta.state.streams.values()] == ["a"]
    assert service.accepted == 1


async def test_after_a_restart_the_executed_changes_are_not_recorded_again(
        tmp_path: Path) -> None:
    harness = ShardHarness(tmp_path)
    service = await service_of(harness)
    changes = [body(0, ev.StreamCreated(0, "a", 1)), body(0, ev.StreamCreated(0, "x", 1)),
               body(1, ev.StreamCreated(1, "b", 2))]
    for change in changes:
        service.apply(change)
    count, size = harness.shard.meta.events_count, log_size(tmp_path)
    harness.shard.close()
    store = MetaStore(tmp_path / "state" / "log")
    again = await service_of(harness, store)
    assert [outcome(again.apply(change)) for change in changes] == [
        Outcome(True, 1), Outcome(False, 1), Outcome(True, 2)]  # decided again, same way
    assert (store.events_count, again.accepted) == (count, 2)
    assert log_size(tmp_path) == size  # nothing recorded twice
    assert outcome(again.apply(body(2, ev.StreamCreated(2, "c", 3)))) == Outcome(True, 3)
    assert sorted(s.name for s in store.state.streams.values()) == ["a", "b", "c"]


async def test_a_change_cut_short_by_a_crash_is_finished_not_repeated(tmp_path: Path) -> None:
    harness = ShardHarness(tmp_path)
    await service_of(harness)
    first, second = ev.StreamCreated(0, "a", 1), ev.StreamCreated(1, "b", 1)
    harness.shard.meta.record(first)  # the crash: after the first event, before the second
    again = await service_of(harness)
    assert outcome(again.apply(body(0, first, second))) == Outcome(True, 1)
    assert sorted(s.name for s in harness.shard.meta.state.streams.values()) == ["a", "b"]
    assert harness.shard.meta.events_count == 3  # root, a, b: nothing twice
    assert MetaStore(tmp_path / "state" / "log").events_count == 3


async def test_after_a_restart_from_a_checkpoint_only_later_changes_are_executed_again(
        tmp_path: Path) -> None:
    harness = ShardHarness(tmp_path)
    service = await service_of(harness)
    service.apply(body(0, ev.StreamCreated(0, "a", 1)))
    checkpoint = service.snapshot()
    later = body(1, ev.StreamCreated(1, "b", 1))
    service.apply(later)
    size = log_size(tmp_path)
    again = await service_of(harness)
    again.restore(checkpoint)
    assert again.accepted == 1
    assert outcome(again.apply(later)) == Outcome(True, 2)
    assert again.accepted == 2 and log_size(tmp_path) == size  # "b" not recorded twice


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


async def test_a_store_behind_a_restored_checkpoint_is_filled_from_a_peer(
        tmp_path: Path) -> None:
    ahead, behind = ShardHarness(tmp_path / "a"), ShardHarness(tmp_path / "b")
    peer, lagging = await service_of(ahead), await service_of(behind)
    changes = [body(0, ev.StreamCreated(0, "a", 1)), body(1, ev.StreamCreated(1, "b", 2)),
               body(2, ev.StreamDeleted(0))]
    for change in changes:
        peer.apply(change)
    lagging.apply(changes[0])  # it saw the first change only, then the checkpoint
    await settled(lagging)

    async def fetch(ask: bytes) -> bytes:
        return await peer.events_for(0, ask)
    lagging.fetch = fetch
    lagging.restore(peer.snapshot())
    later = body(3, ev.StreamCreated(2, "c", 3))
    assert outcome(lagging.apply(later)) == outcome(peer.apply(later)) == Outcome(True, 4)
    await settled(lagging)
    await settled(peer)
    assert lagging.accepted == peer.accepted == 4
    assert behind.shard.meta.history[1:] == ahead.shard.meta.history[1:]  # after root
    assert sorted(s.name for s in behind.shard.meta.state.streams.values()) == ["b", "c"]


@pytest.mark.parametrize("marker", [
    '{"position": 3, "accepted": 2, "events": 1, "events_before": 1}',  # the earlier format
    '{"prefix": ',  # cut short
])
def test_a_marker_this_version_cannot_read_stops_the_start_with_one_line(
        tmp_path: Path, marker: str) -> None:
    harness = ShardHarness(tmp_path)
    path = harness.shard.data_path / "meta-applied.json"
    path.write_text(marker)
    with pytest.raises(MetaLogCorrupt, match="cannot be upgraded in place") as caught:
        MetaService(harness.shard, harness.shard.meta, path)
    assert "\n" not in str(caught.value)


async def test_waits_for_metadata_that_time_out_or_are_cancelled_leave_no_waiter(
        tmp_path: Path) -> None:
    """A node behind the metadata a call was made on answers it TaskTimeout after the
    wait; the waits that timed out, or whose caller went away, are no longer listed (they
    piled up for as long as the node stayed behind), and one still waiting is woken."""
    harness = ShardHarness(tmp_path)
    service = await service_of(harness)
    for _ in range(3):
        assert not await service.reached(5, 0.001)
    gone = asyncio.ensure_future(service.reached(5, 60))
    await asyncio.sleep(0)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert service.waiters == []  # four waiters on the old code
    waiting = asyncio.ensure_future(service.reached(1, 60))
    await asyncio.sleep(0)
    service.apply(body(0, ev.StreamCreated(0, "a", 1)))
    assert await asyncio.wait_for(waiting, 5)
    assert service.waiters == []
