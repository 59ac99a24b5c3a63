"""MetaStore: events persist, replay restores the state, a torn tail is dropped."""

from lurcher.core.meta import events as ev
from lurcher.core.meta.store import MetaStore
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.identifier import Identifier

import pytest


def populate(store: MetaStore) -> None:
    st = store.state
    store.record(ev.StreamCreated(st.stream_ids.peek(), "s1", 10))
    store.record(ev.StreamCreated(st.stream_ids.peek(), "s2", 11))
    store.record(ev.TopicCreated(0, 0, "t1", 12, 3, 1, 2**64 - 1, 2**64 - 1, 1))
    store.record(ev.PartitionsCreated(0, 0, 2, 13))
    store.record(ev.ConsumerGroupCreated(0, 0, 0, "g1"))
    store.record(ev.UserCreated(0, "root", "hash", 1, b"\x01" * 10 + b"\x00", 14))
    store.record(ev.TokenCreated(0, "pat1", "digest", 0))
    store.record(ev.StreamUpdated(1, "s2b"))


def snapshot(store: MetaStore):
    st = store.state
    topic = st.streams[0].topics[0]
    return (sorted(st.stream_names.items()), topic.partitions_count, topic.partition_created_at,
            sorted(topic.group_names.items()), sorted(st.usernames.items()),
            sorted(st.token_hashes))


def test_replay_restores_state(tmp_path):
    store = MetaStore(tmp_path / "log")
    populate(store)
    before = snapshot(store)
    store.close()
    reopened = MetaStore(tmp_path / "log")
    assert snapshot(reopened) == before
    assert reopened.events_count == 8


def test_torn_tail_is_truncated_and_earlier_events_kept(tmp_path):
    store = MetaStore(tmp_path / "log")
    populate(store)
    store.close()
    size = (tmp_path / "log").stat().st_size
    with open(tmp_path / "log", "ab") as f:
        f.write(b"\x40\x00\x00\x00\x01\x02")  # a record header promising 64 bytes
    reopened = MetaStore(tmp_path / "log")
    assert reopened.events_count == 8
    assert (tmp_path / "log").stat().st_size == size


def test_corrupt_record_stops_replay_there(tmp_path):
    store = MetaStore(tmp_path / "log")
    populate(store)
    store.close()
    data = bytearray((tmp_path / "log").read_bytes())
    data[-1] ^= 0xFF  # corrupt the last record's body: its checksum no longer matches
    (tmp_path / "log").write_bytes(bytes(data))
    reopened = MetaStore(tmp_path / "log")
    assert reopened.events_count == 7
    assert "s2" in reopened.state.stream_names


def test_lookups_raise_iggy_not_found_codes(tmp_path):
    store = MetaStore(tmp_path / "log")
    populate(store)
    st = store.state
    with pytest.raises(IggyError) as e:
        st.stream(Identifier(9))
    assert e.value.code == ErrorCode.STREAM_ID_NOT_FOUND
    with pytest.raises(IggyError) as e:
        st.stream(Identifier("nope"))
    assert e.value.code == ErrorCode.STREAM_NAME_NOT_FOUND
    with pytest.raises(IggyError) as e:
        st.topic(Identifier(0), Identifier("nope"))
    assert e.value.code == ErrorCode.TOPIC_NAME_NOT_FOUND
    assert st.topic(Identifier("s1"), Identifier("t1")).id == 0


def test_deleted_ids_are_reused_after_restart(tmp_path):
    store = MetaStore(tmp_path / "log")
    populate(store)
    store.record(ev.StreamDeleted(0))
    store.close()
    reopened = MetaStore(tmp_path / "log")
    assert reopened.state.stream_ids.peek() == 0


def test_grants_go_with_their_stream_or_topic_also_on_replay(tmp_path):
    """Ids are reused, so a deleted stream's or topic's grants must not name the next one."""
    from lurcher.core.wire.values.permissions import (Permissions, StreamPermissions,
                                                      TopicPermissions)
    store = MetaStore(tmp_path / "log")
    populate(store)  # streams 0 (topic 0) and 1
    store.record(ev.TopicCreated(0, 1, "t2", 15, 1, 1, 2**64 - 1, 2**64 - 1, 1))
    read = TopicPermissions(read_topic=True)
    grants = Permissions(streams={0: StreamPermissions(topics={0: read, 1: read}),
                                  1: StreamPermissions(read_stream=True)})
    store.record(ev.UserCreated(1, "u", "hash", 1, grants.encode(), 16))
    store.record(ev.UserCreated(2, "none", "hash", 1, None, 17))
    store.record(ev.TopicDeleted(0, 0))
    store.record(ev.StreamDeleted(1))
    left = Permissions(streams={0: StreamPermissions(topics={1: read})})
    assert Permissions.decode(store.state.users[1].permissions)[0] == left
    assert store.state.users[2].permissions is None
    store.close()
    reopened = MetaStore(tmp_path / "log")
    assert Permissions.decode(reopened.state.users[1].permissions)[0] == left
