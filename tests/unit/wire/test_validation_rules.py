"""The field rules of ``core.wire.validation``: one set of rules for every front end.

Each case is a typed request (what the HTTP routes build from JSON) and, where the binary
form can carry the bad value, the same request decoded from bytes: both must fail with the
same Iggy code. Legacy helpers (``wire_name``, ``clamp_uint``, ``stored_problems``) make
stored out-of-range values encodable.
"""

from __future__ import annotations

import pytest

from lurcher.core.meta import events as ev
from lurcher.core.meta.state import MetaState
from lurcher.core.shard.reply import ok_frame_parts, payload_parts
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.consumer_groups.create_consumer_group import CreateConsumerGroup
from lurcher.core.wire.requests.messages.poll_messages import PollMessages
from lurcher.core.wire.requests.streams.create_stream import CreateStream
from lurcher.core.wire.requests.streams.update_stream import UpdateStream
from lurcher.core.wire.requests.topics.create_topic import CreateTopic
from lurcher.core.wire.requests.topics.update_topic import UpdateTopic
from lurcher.core.wire.responses.streams import StreamHeader
from lurcher.core.wire.validation import (
    U64_MAX,
    check_encodable,
    clamp_uint,
    stored_problems,
    wire_name,
)
from lurcher.core.wire.values.consumer import Consumer
from lurcher.core.wire.values.polling import PollingStrategy

S, T = Identifier("s"), Identifier("t")
LONG = "n" * 256
TWO_BYTE_128 = "é" * 128  # 256 bytes in UTF-8


def topic(**over: object) -> CreateTopic:
    fields = dict(stream_id=S, partitions_count=1, compression=1, message_expiry_us=0,
                  max_topic_size_bytes=0, replication_factor=0, name="t")
    fields.update(over)
    return CreateTopic(**fields)  # type: ignore[arg-type]


def update(**over: object) -> UpdateTopic:
    fields = dict(stream_id=S, topic_id=T, compression=1, message_expiry_us=0,
                  max_topic_size_bytes=0, replication_factor=0, name="t")
    fields.update(over)
    return UpdateTopic(**fields)  # type: ignore[arg-type]


BAD = [
    (CreateStream(""), ErrorCode.INVALID_STREAM_NAME),
    (CreateStream(LONG), ErrorCode.INVALID_STREAM_NAME),
    (CreateStream(TWO_BYTE_128), ErrorCode.INVALID_STREAM_NAME),
    (CreateStream("\ud800"), ErrorCode.INVALID_STREAM_NAME),
    (UpdateStream(S, LONG), ErrorCode.INVALID_STREAM_NAME),
    (CreateConsumerGroup(S, T, LONG), ErrorCode.INVALID_CONSUMER_GROUP_NAME),
    (CreateConsumerGroup(S, T, ""), ErrorCode.INVALID_CONSUMER_GROUP_NAME),
    (topic(name=LONG), ErrorCode.INVALID_TOPIC_NAME),
    (topic(name=""), ErrorCode.INVALID_TOPIC_NAME),
    (topic(message_expiry_us=-5), ErrorCode.INVALID_FORMAT),
    (topic(message_expiry_us=U64_MAX + 1), ErrorCode.INVALID_FORMAT),
    (topic(max_topic_size_bytes=-1), ErrorCode.INVALID_TOPIC_SIZE),
    (topic(replication_factor=300), ErrorCode.INVALID_REPLICATION_FACTOR),
    (topic(replication_factor=-1), ErrorCode.INVALID_REPLICATION_FACTOR),
    (topic(compression=3), ErrorCode.INVALID_COMMAND),
    (topic(compression=True), ErrorCode.INVALID_COMMAND),
    (topic(partitions_count=-1), ErrorCode.TOO_MANY_PARTITIONS),
    (topic(partitions_count=1001), ErrorCode.TOO_MANY_PARTITIONS),
    (update(name=LONG), ErrorCode.INVALID_TOPIC_NAME),
    (update(message_expiry_us=-5), ErrorCode.INVALID_FORMAT),
    (update(replication_factor=256), ErrorCode.INVALID_REPLICATION_FACTOR),
]


@pytest.mark.parametrize("request_value, code", BAD, ids=lambda v: repr(v)[:40])
def test_bad_field_is_refused_with_its_code(request_value: object, code: ErrorCode) -> None:
    with pytest.raises(IggyError) as info:
        request_value.validate()  # type: ignore[attr-defined]
    assert info.value.code == code


GOOD = [
    CreateStream("s"), CreateStream("n" * 255), CreateStream("é" * 127),
    topic(), topic(message_expiry_us=U64_MAX, max_topic_size_bytes=U64_MAX,
                   replication_factor=255, compression=2, name="n" * 255),
    update(replication_factor=1, message_expiry_us=1),
    CreateConsumerGroup(S, T, "g"),
]


@pytest.mark.parametrize("request_value", GOOD, ids=lambda v: repr(v)[:40])
def test_good_fields_pass_and_round_trip(request_value: object) -> None:
    request_value.validate()  # type: ignore[attr-defined]
    check_encodable(request_value)
    decoded = type(request_value).decode_exact(request_value.encode())  # type: ignore
    assert decoded == request_value
    decoded.validate()


@pytest.mark.parametrize("compression", [0, 3, 255])
def test_binary_decode_path_refuses_with_the_same_code(compression: int) -> None:
    raw = topic(compression=1).encode()
    at = raw.index(bytes([1, 0, 0, 0]), 3) + 4  # partitions_count u32, then compression
    bad = raw[:at] + bytes([compression]) + raw[at + 1:]
    decoded = CreateTopic.decode_exact(bad)
    with pytest.raises(IggyError) as info:
        decoded.validate()
    assert info.value.code == ErrorCode.INVALID_COMMAND


def test_encodable_refuses_out_of_range_integers() -> None:
    poll = PollMessages(Consumer.of(1), S, T, -1, PollingStrategy(1, 0), 10, False)
    with pytest.raises(IggyError) as info:
        check_encodable(poll)
    assert info.value.code == ErrorCode.INVALID_FORMAT
    check_encodable(PollMessages(Consumer.of(1), S, T, 0, PollingStrategy(1, 0), 10, False))


def test_legacy_values_become_encodable() -> None:
    assert wire_name("x" * 300) == "x" * 255
    assert len(wire_name("é" * 200).encode()) == 254  # never a split character
    assert wire_name("") == "?"
    assert wire_name("ok") == "ok"
    assert clamp_uint(-5, 64, U64_MAX) == U64_MAX
    assert clamp_uint(300, 8, 1) == 1
    assert clamp_uint(7, 8, 1) == 7


def test_stored_problems_names_every_bad_value() -> None:
    state = MetaState()
    state.apply(ev.StreamCreated(0, "s" * 300, 1))
    state.apply(ev.TopicCreated(0, 0, "t", 1, 1, 1, -5, 10**9, 300))
    state.apply(ev.ConsumerGroupCreated(0, 0, 0, "g" * 256))
    state.apply(ev.StreamCreated(1, "fine", 1))
    problems = list(stored_problems(state))
    assert len(problems) == 4
    assert any("message_expiry_us -5" in p for p in problems)
    assert any("replication_factor 300" in p for p in problems)


def test_unencodable_reply_is_an_error_frame_not_an_exception() -> None:
    bad = StreamHeader(0, 0, 0, 0, 0, "s" * 300)
    with pytest.raises(IggyError) as info:
        payload_parts([bad])
    assert info.value.code == ErrorCode.CANNOT_SERIALIZE_RESOURCE
    frame = b"".join(ok_frame_parts([bad]))
    assert frame == int(ErrorCode.CANNOT_SERIALIZE_RESOURCE).to_bytes(4, "little") + bytes(4)
