"""The replication codec: round trip per message type, truncation, bad input, property."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lurcher.core.replication.codec import ReplicationWireError, decode, encode, encode_parts
from lurcher.core.replication.messages import (
    MESSAGE_TYPES, Checkpoint, ClientSlot, Commit, DoViewChange, Entry, GetState, NewState, Prepare, PrepareOk,
    Recovery, RecoveryResponse, Reply, Request, StartView, StartViewChange,
)

REQ = Request(client=7, request=3, body=b"payload")
ENTRY = Entry(view=2, op=9, requests=(REQ, Request(8, 1, b"")))
SAMPLES = [
    REQ,
    Reply(view=4, client=7, request=3, result=b"\x01\x02"),
    Prepare(view=4, commit=8, entry=ENTRY, replica=1),
    PrepareOk(view=4, op=9, replica=2),
    Commit(view=4, commit=9, replica=1),
    StartViewChange(view=5, replica=0),
    DoViewChange(view=5, log_view=4, commit=8, log=(ENTRY, ENTRY), replica=2),
    StartView(view=5, commit=8, log=(ENTRY,), replica=2),
    Recovery(nonce=2**63 - 1, replica=1),
    RecoveryResponse(view=5, nonce=11, commit=8, log=None, replica=0),
    RecoveryResponse(view=5, nonce=11, commit=8, log=(ENTRY,), replica=2),
    GetState(view=5, op=3, replica=1),
    NewState(view=5, after=3, commit=8, log=(ENTRY,), replica=2),
]
CHECKPOINT = Checkpoint(op=8, state=b"\x92\xa1a\xa1b",
                        table=(ClientSlot(7, 3, b"\x01"), ClientSlot(8, 1, b"")))
WITH_CHECKPOINT = [
    DoViewChange(view=5, log_view=4, commit=8, log=(ENTRY,), replica=2, checkpoint=CHECKPOINT),
    StartView(view=5, commit=9, log=(ENTRY,), replica=2, checkpoint=CHECKPOINT),
    RecoveryResponse(view=5, nonce=11, commit=9, log=(ENTRY,), replica=2, checkpoint=CHECKPOINT),
    NewState(view=5, after=8, commit=9, log=(ENTRY,), replica=2, checkpoint=CHECKPOINT),
    NewState(view=5, after=8, commit=9, log=(), replica=2,
             checkpoint=Checkpoint(op=8, state=b"", table=())),
]
ALL = SAMPLES + WITH_CHECKPOINT


def test_every_message_type_has_a_sample() -> None:
    assert {type(m) for m in SAMPLES} == set(MESSAGE_TYPES)


@pytest.mark.parametrize("msg", ALL, ids=lambda m: type(m).__name__)
def test_round_trip(msg: object) -> None:
    assert decode(encode(msg)) == msg


@pytest.mark.parametrize("msg", ALL, ids=lambda m: type(m).__name__)
def test_every_truncation_is_a_wire_error(msg: object) -> None:
    data = encode(msg)
    for cut in range(len(data)):
        with pytest.raises(ReplicationWireError):
            decode(data[:cut])


def test_trailing_bytes_unknown_tag_and_bad_bool_are_rejected() -> None:
    with pytest.raises(ReplicationWireError, match="trailing"):
        decode(encode(SAMPLES[0]) + b"\x00")
    with pytest.raises(ReplicationWireError, match="unknown message tag 0"):
        decode(b"\x00")
    with pytest.raises(ReplicationWireError, match="unknown message tag 200"):
        decode(b"\xc8" + bytes(20))
    bad_bool = bytearray(encode(SAMPLES[9]))
    bad_bool[1 + 8 + 8 + 8] = 2
    with pytest.raises(ReplicationWireError):
        decode(bytes(bad_bool))


def test_a_checkpoint_flag_other_than_0_or_1_is_rejected() -> None:
    data = bytearray(encode(WITH_CHECKPOINT[1]))
    flag_at = len(encode(StartView(5, 9, (ENTRY,), 2))) - 1
    assert data[flag_at] == 1
    data[flag_at] = 2
    with pytest.raises(ReplicationWireError):
        decode(bytes(data))


def test_a_hostile_client_table_count_is_rejected_without_allocating() -> None:
    msg = NewState(view=1, after=0, commit=0, log=(), replica=0,
                   checkpoint=Checkpoint(op=0, state=b"", table=()))
    data = bytearray(encode(msg))
    data[-4:] = (0xFFFF_FFFF).to_bytes(4, "little")
    with pytest.raises(ReplicationWireError, match="cannot fit"):
        decode(bytes(data))


def test_a_hostile_count_is_rejected_without_allocating() -> None:
    data = bytearray(encode(StartView(view=1, commit=0, log=(), replica=0)))
    data[1 + 8 + 8:1 + 8 + 8 + 4] = (0xFFFF_FFFF).to_bytes(4, "little")
    with pytest.raises(ReplicationWireError, match="cannot fit"):
        decode(bytes(data))


u64 = st.integers(0, 2**64 - 1)
u8 = st.integers(0, 255)
requests = st.builds(Request, u64, u64, st.binary(max_size=40))
entries = st.builds(Entry, u64, u64, st.tuples(requests) | st.just(()) | st.tuples(requests, requests))
logs = st.lists(entries, max_size=4).map(tuple)
slots = st.lists(st.builds(ClientSlot, u64, u64, st.binary(max_size=20)), max_size=3).map(tuple)
checkpoints = st.none() | st.builds(Checkpoint, u64, st.binary(max_size=40), slots)
messages = st.one_of(
    requests,
    st.builds(Reply, u64, u64, u64, st.binary(max_size=40)),
    st.builds(Prepare, u64, u64, entries, u8),
    st.builds(PrepareOk, u64, u64, u8),
    st.builds(Commit, u64, u64, u8),
    st.builds(StartViewChange, u64, u8),
    st.builds(DoViewChange, u64, u64, u64, logs, u8, checkpoints),
    st.builds(StartView, u64, u64, logs, u8, checkpoints),
    st.builds(Recovery, u64, u8),
    st.builds(RecoveryResponse, u64, u64, u64, st.none() | logs, u8, checkpoints),
    st.builds(GetState, u64, u64, u8),
    st.builds(NewState, u64, u64, u64, logs, u8, checkpoints),
)


@settings(max_examples=300, deadline=None)
@given(messages)
def test_property_round_trip(msg: object) -> None:
    assert decode(encode(msg)) == msg


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120))
def test_property_arbitrary_bytes_decode_or_raise_wire_error(data: bytes) -> None:
    try:
        msg = decode(data)
    except ReplicationWireError:
        return
    assert encode(msg) == data


def test_large_blobs_are_framed_by_reference_and_decoded_as_views_small_ones_copied() -> None:
    big = b"x" * 100_000
    msg = Prepare(1, 2, Entry(1, 3, (Request(1, 2, big), Request(1, 3, b"small"))), 0)
    parts = encode_parts(msg)
    assert any(part is big for part in parts), "the large body is referenced, not copied"
    frame = b"".join(parts)
    bodies = [r.body for r in decode(frame).entry.requests]
    assert isinstance(bodies[0], memoryview) and bodies[0].obj is frame
    assert isinstance(bodies[1], bytes)
    padded = frame + bytes(1_000_000)  # a body would pin a buffer 10x its size: copied
    pinned = decode(memoryview(padded)[:len(frame)]).entry.requests[0].body
    assert isinstance(pinned, bytes) and pinned == big
