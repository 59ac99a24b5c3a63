"""Exact bytes against the captures in the wire reference (iggy-0.8-wire.md §3-§11)."""

from __future__ import annotations

import pytest
from wire_samples import Message, raw_batch

from lurcher.core.wire.buffer import Reader
from lurcher.core.wire.codec import WireStruct
from lurcher.core.wire.commands import decode_request, decode_response
from lurcher.core.wire.frames import encode_error, encode_request, encode_response
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.consumer_groups.create_consumer_group import CreateConsumerGroup
from lurcher.core.wire.requests.consumer_groups.get_consumer_group import GetConsumerGroup
from lurcher.core.wire.requests.consumer_groups.join_consumer_group import JoinConsumerGroup
from lurcher.core.wire.requests.consumer_offsets.delete_consumer_offset import DeleteConsumerOffset
from lurcher.core.wire.requests.consumer_offsets.store_consumer_offset import StoreConsumerOffset
from lurcher.core.wire.requests.messages.poll_messages import PollMessages
from lurcher.core.wire.requests.messages.send_messages import SendMessages
from lurcher.core.wire.requests.pat.login_with_personal_access_token import (
    LoginWithPersonalAccessToken,
)
from lurcher.core.wire.requests.streams.create_stream import CreateStream
from lurcher.core.wire.requests.streams.get_stream import GetStream
from lurcher.core.wire.requests.topics.create_topic import CreateTopic
from lurcher.core.wire.requests.users.login_user import LoginUser
from lurcher.core.wire.responses.cluster import ClusterMetadata, ClusterNode
from lurcher.core.wire.responses.identity import IdentityInfo
from lurcher.core.wire.responses.streams import StreamDetails, StreamHeader
from lurcher.core.wire.values import Consumer, Partitioning, PollingStrategy

S1, T1, G1 = Identifier("s1"), Identifier("t1"), Identifier("g1")
GROUP_G1 = Consumer.of("g1", group=True)


def h(text: str) -> bytes:
    """Hex with spaces, '|' separators and "quoted ascii" pieces."""
    out = b""
    for i, part in enumerate(text.split('"')):
        out += part.encode() if i % 2 else bytes.fromhex(part.replace("|", ""))
    return out


# (value, captured payload bytes)
CAPTURED_PAYLOADS: list[tuple[WireStruct, bytes]] = [
    (LoginUser("iggy", "iggy", "0.10.0"), h('04 "iggy" 04 "iggy" 06000000 "0.10.0" 00000000')),
    (LoginWithPersonalAccessToken("iggypat-token123"), h("10 696767797061742d746f6b656e313233")),
    (Identifier(0), h("01 04 00000000")),
    (Identifier("s1"), h("02 02 7331")),
    (CreateStream("s1"), h("02 7331")),
    (GetStream(Identifier(0)), h("01 04 00000000")),
    (GetStream(S1), h("02 02 7331")),
    (StreamDetails(StreamHeader(0, 0x0006_60d8_281f_6d3d, 0, 0, 0, "s1"), []),
     h("00000000 3d6d1f28d8600600 00000000 0000000000000000 0000000000000000 02 7331")),
    (CreateTopic(S1, 2, 1, 0, 0, 0, "t1"),
     h("02 02 7331 | 02000000 | 01 | 0000000000000000 | 0000000000000000 | 00 | 02 7431")),
    (CreateTopic(Identifier(0), 1, 2, 60_000_000, 1_000_000, 1, "t2"),
     h("01 04 00000000 | 01000000 | 02 | 0087930300000000 | 40420f0000000000 | 01 | 02 7432")),
    (StoreConsumerOffset(GROUP_G1, S1, T1, 0, 2),
     h("02 02 02 6731 | 02 02 7331 | 02 02 7431 | 01 00000000 | 0200000000000000")),
    (DeleteConsumerOffset(GROUP_G1, S1, T1, 0),
     h("02 02 02 6731 | 02 02 7331 | 02 02 7431 | 01 00000000")),
    (PollMessages(Consumer.of(0), S1, T1, 0, PollingStrategy.offset(0), 10, False),
     h("01 01 04 00000000 | 02 02 7331 | 02 02 7431 | 01 00000000 | 01 0000000000000000"
       "| 0a000000 | 00")),
    (PollMessages(GROUP_G1, S1, T1, None, PollingStrategy.next(), 1000, True),
     h("02 02 02 6731 | 02 02 7331 | 02 02 7431 | 00 00000000 | 05 0000000000000000"
       "| e8030000 | 01")),
    (CreateConsumerGroup(S1, T1, "g1"), h("02 02 7331 | 02 02 7431 | 02 6731")),
    (GetConsumerGroup(S1, T1, G1), h("02 02 7331 | 02 02 7431 | 02 02 6731")),
    (JoinConsumerGroup(S1, T1, G1), h("02 02 7331 | 02 02 7431 | 02 02 6731")),
    (ClusterMetadata("iggy-cluster",
                     [ClusterNode("iggy-node", "127.0.0.1", 18090, 8080, 3000, 8092)]),
     h('0c000000 "iggy-cluster" 01000000 09000000 "iggy-node" 09000000 "127.0.0.1" '
       'aa46 901f b80b 9c1f 00 00')),
]


@pytest.mark.parametrize(("value", "captured"), CAPTURED_PAYLOADS,
                         ids=[type(v).__name__ for v, _ in CAPTURED_PAYLOADS])
def test_captured_payload(value: WireStruct, captured: bytes) -> None:
    assert value.encode() == captured
    r = Reader(captured)
    assert type(value).read(r) == value and r.remaining == 0


def test_cluster_metadata_reply_is_56_bytes() -> None:
    assert len(CAPTURED_PAYLOADS[-1][1]) == 56


def test_captured_frames() -> None:
    login = CAPTURED_PAYLOADS[0][1]
    assert encode_request(38, login)[:8] == h("1c000000 26000000")  # length 28, code 38
    assert encode_request(1) == h("04000000 01000000")
    assert encode_request(12) == h("04000000 0c000000")
    assert encode_response(0, IdentityInfo(0).encode()) == h("00000000 04000000 00000000")
    assert encode_response(0) == h("00000000 00000000")
    assert encode_error(1012) == h("f4030000 00000000")
    assert decode_request(38, login) == LoginUser("iggy", "iggy", "0.10.0", None)
    assert decode_response(38, h("00000000")) == IdentityInfo(0)


SEND_HEAD = h("12000000 | 02 02 7331 | 02 02 7431 | 02 04 00000000 | 02000000"
              "| 00000000 45000000 0000000000000000 | 00000000 88000000 0000000000000000")


def test_captured_send_messages() -> None:
    origin = 1_700_000_000_123_456
    batch = raw_batch([Message(origin_timestamp=origin, payload=b"hello"),
                       Message(origin_timestamp=origin, payload=b"\x00\x01\x02")])
    encoded = SendMessages(S1, T1, Partitioning.partition(0), batch).encode()
    assert encoded[:len(SEND_HEAD)] == SEND_HEAD
    first = encoded[len(SEND_HEAD):len(SEND_HEAD) + 69]
    assert first[:40] == bytes(40)  # checksum, id, offset, timestamp all zero
    assert first[40:48] == origin.to_bytes(8, "little")
    assert first[48:64] == h("00000000 05000000 0000000000000000")
    assert first[64:] == b"hello"
    assert len(encoded) == len(SEND_HEAD) + 136
    decoded = SendMessages.decode_exact(encoded)
    assert (decoded.stream_id, decoded.topic_id, decoded.partitioning.partition_id) == (S1, T1, 0)
    assert decoded.batch.count == 2 and bytes(decoded.batch.blob) == bytes(batch.blob)


def test_captured_send_messages_with_batch_build() -> None:
    """The same capture, built with ``MessageBatch.build`` (the batch module's client side)."""
    from lurcher.core.wire.batch import MessageBatch

    batch = MessageBatch.build([b"hello", b"\x00\x01\x02"], origin_timestamp_us=1)
    encoded = SendMessages(S1, T1, Partitioning.partition(0), batch).encode()
    assert encoded[:len(SEND_HEAD)] == SEND_HEAD
    assert len(encoded) == len(SEND_HEAD) + 136
