"""Client ids (``lurcher.auth.session``): striped by shard (id % shards = shard, so shard
processes never hand out the same id), within the wire's u32, never 0, and not restarted
from the same value when a shard process restarts (a client that migrated away from the
shard before it restarted keeps its id)."""

from __future__ import annotations

from lurcher.auth import session

U32_MAX = 0xFFFF_FFFF


def ids_of_one_start(monkeypatch, shard_id: int, shards: int, count: int = 3) -> list[int]:
    monkeypatch.setattr(session, "_client_ids", session._client_ids)  # restored after
    session.number_clients_for_shard(shard_id, shards)
    return [session.next_client_id() for _ in range(count)]


def test_a_restarted_shard_does_not_hand_out_its_earlier_ids_again(monkeypatch):
    first_start = ids_of_one_start(monkeypatch, 1, 4)
    restart = ids_of_one_start(monkeypatch, 1, 4)
    assert not set(first_start) & set(restart)


def test_ids_stay_striped_by_shard_and_within_u32(monkeypatch):
    for shard_id in range(4):
        ids = ids_of_one_start(monkeypatch, shard_id, 4)
        assert all(i % 4 == shard_id and 0 < i <= U32_MAX for i in ids)
        assert len(set(ids)) == len(ids)


def test_ids_wrap_below_u32_keeping_the_stripe(monkeypatch):
    monkeypatch.setattr(session.secrets, "randbelow", lambda bound: bound - 1)
    ids = ids_of_one_start(monkeypatch, 3, 4, count=4)
    assert all(i % 4 == 3 and 0 < i <= U32_MAX for i in ids)
    assert len(set(ids)) == len(ids)
