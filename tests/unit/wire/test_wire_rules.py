"""Decode rules and their status codes (0.8 server behaviour), handler-side ``validate``
rules, the user-headers block, frames, poll-message iteration and the command table."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from wire_samples import BATCH, PERMS, Message, raw_batch

from lurcher.core.wire.commands import COMMANDS, by_name, decode_request, decode_response
from lurcher.core.wire.error_codes import ErrorCode as E
from lurcher.core.wire.errors import IggyError, WireError
from lurcher.core.connection.framing import BadFrame, Frame, FrameLimits, FrameReader
from lurcher.core.wire.frames import (
    decode_response_header,
    encode_request,
    encode_response,
    split_response,
)
from lurcher.core.wire.headers import (
    HeaderKind,
    HeaderValue,
    decode_headers,
    encode_headers,
    validate_headers,
)
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.consumer_offsets.get_consumer_offset import GetConsumerOffset
from lurcher.core.wire.requests.messages.flush_unsaved_buffer import FlushUnsavedBuffer
from lurcher.core.wire.requests.messages.poll_messages import PollMessages
from lurcher.core.wire.requests.messages.send_messages import SendMessages
from lurcher.core.wire.requests.partitions.create_partitions import CreatePartitions
from lurcher.core.wire.requests.partitions.delete_partitions import DeletePartitions
from lurcher.core.wire.requests.pat.create_personal_access_token import CreatePersonalAccessToken
from lurcher.core.wire.requests.streams.create_stream import CreateStream
from lurcher.core.wire.requests.system.get_client import GetClient
from lurcher.core.wire.requests.system.get_snapshot_file import GetSnapshotFile
from lurcher.core.wire.requests.topics.create_topic import CreateTopic
from lurcher.core.wire.requests.topics.update_topic import UpdateTopic
from lurcher.core.wire.requests.users.change_password import ChangePassword
from lurcher.core.wire.requests.users.create_user import CreateUser
from lurcher.core.wire.requests.users.login_user import LoginUser
from lurcher.core.wire.requests.users.update_permissions import UpdatePermissions
from lurcher.core.wire.requests.users.update_user import UpdateUser
from lurcher.core.wire.responses.messages import PolledMessages, iter_messages
from lurcher.core.wire.responses.users import UserDetails, UserHeader
from lurcher.core.wire.values import Consumer, Partitioning, Permissions, PollingStrategy

h = bytes.fromhex
S1T1 = "02027331 02027431"

# (decoder, payload hex, expected status) — what the 0.8 server answers for these bytes
BAD_PAYLOADS: list[tuple[Callable, str, E]] = [
    (CreateStream.decode, "00", E.INVALID_FORMAT),                      # empty name
    (CreateStream.decode, "03 6162", E.INVALID_COMMAND),                # truncated name
    (CreateStream.decode, "02 ff fe", E.INVALID_UTF8),                  # see report: server says 3
    (GetConsumerOffset.decode, "03 0104 00000000", E.INVALID_COMMAND),  # consumer kind 3
    (PollMessages.decode, f"01010400000000 {S1T1} 0000000000 06 0000000000000000 01000000 00",
     E.INVALID_COMMAND),                                                # polling kind 6
    (PollMessages.decode, f"01010400000000 {S1T1} 0000000000 00", E.INVALID_COMMAND),
    (SendMessages.decode, f"0d000000 {S1T1} 04 00 00000000", E.INVALID_COMMAND),   # part. kind 4
    (SendMessages.decode, f"0e000000 {S1T1} 01 01 00 00000000", 
     E.INVALID_COMMAND),  # balanced with a value
    (SendMessages.decode, f"10000000 {S1T1} 02 03 000000 00000000", E.INVALID_COMMAND),
    (SendMessages.decode, f"0f000000 {S1T1} 02 04 00000000 00000000", 
     E.INVALID_COMMAND),  # metadata_length mismatch
    (SendMessages.decode, "11000000 0103 00000000 02027431 0100 00000000", E.INVALID_IDENTIFIER),
    (SendMessages.decode, "11000000 0202 7331 0900 7431 0100 00000000", E.INVALID_IDENTIFIER),
    (SendMessages.decode, f"0e000000 {S1T1} 0100 01000000", E.INVALID_COMMAND),  # short index
    (CreateUser.decode, "04 75736572 03 707771 01 01 05000000" + "00" * 10 + "00",
     E.INVALID_FORMAT),                                                 # perm_len 5 != 11
    (UpdatePermissions.decode, "01040000000001 0c000000" + "00" * 11, E.INVALID_FORMAT),
]


@pytest.mark.parametrize(("decode", "payload", "status"), BAD_PAYLOADS)
def test_bad_payload_status(decode: Callable, payload: str, status: E) -> None:
    with pytest.raises(WireError) as err:
        decode(h(payload))
    assert err.value.code == status


# lenient bytes: the 0.8 server reads these as booleans / absent rather than failing
def test_lenient_bytes_follow_the_server() -> None:
    poll = h(f"01010400000000 {S1T1} 0207000000 05 0000000000000000 01000000 02")
    assert PollMessages.decode_exact(poll).auto_commit is True
    assert PollMessages.decode_exact(poll).partition_id is None  # flag 2 = absent
    flush = h(f"{S1T1} 01000000 07")
    assert FlushUnsavedBuffer.decode_exact(flush) == FlushUnsavedBuffer(
        Identifier("s1"), Identifier("t1"), 1, True)
    assert CreateUser.decode_exact(h("04 75736572 00 01 02")) == CreateUser("user", "", 1, None)
    assert UpdateUser.decode_exact(h("0104000000000205")) == UpdateUser(Identifier(0))
    perms = Permissions.decode_exact(bytes([5] * 10) + b"\x00")
    assert perms == Permissions.root()
    assert SendMessages.decode_exact(h(f"0e000000 {S1T1} 0300 00000000")).partitioning == \
        Partitioning(3, b"")  # empty key accepted on the TCP path


def test_permissions_encoder_orders_by_id_and_keeps_last_duplicate() -> None:
    encoded = PERMS.encode()
    assert encoded.index(b"\x01\x00\x00\x00") < encoded.index(b"\x09\x00\x00\x00")
    dup = bytes(10) + h("01 05000000 010000000000 00 01 05000000 000000000001 00 00")
    assert Permissions.decode_exact(dup).streams[5].send_messages is True
    assert Permissions.root().encode() == bytes([1] * 10) + b"\x00"


def test_user_details_permission_forms() -> None:
    header = UserHeader(1, 2, 1, "bob")
    assert UserDetails(header).encode().endswith(bytes(4))
    blob = PERMS.encode()
    with_perms = UserDetails(header, PERMS).encode()
    assert with_perms.endswith(b"\x01" + len(blob).to_bytes(4, "little") + blob)
    # any non-zero flag byte means "permissions follow"
    odd = header.encode() + b"\x07" + len(blob).to_bytes(4, "little") + blob
    assert UserDetails.decode_exact(odd).permissions == PERMS


# (request, expected status of validate(), or None when valid)
VALIDATE: list[tuple[object, E | None]] = [
    (LoginUser("iggy", "iggy"), None),
    (LoginUser("ig", "iggy"), E.INVALID_USERNAME),
    (LoginUser("i" * 51, "iggy"), E.INVALID_USERNAME),
    (LoginUser("iggy", "ig"), E.INVALID_PASSWORD),
    (LoginUser("iggy", "p" * 101), E.INVALID_PASSWORD),
    (CreateUser("user", "pass", 1), None),
    (CreateUser("us", "pass"), E.INVALID_USERNAME),
    (CreateUser("user", ""), E.INVALID_PASSWORD),
    (CreateUser("user", "pass", 3), E.INVALID_COMMAND),
    (UpdateUser(Identifier(1), "ab"), E.INVALID_USERNAME),
    (UpdateUser(Identifier(1), None, 0), E.INVALID_COMMAND),
    (UpdateUser(Identifier(1)), None),
    (ChangePassword(Identifier(1), "old", "x" * 100), None),
    (ChangePassword(Identifier(1), "ol", "new"), E.INVALID_PASSWORD),
    (CreatePersonalAccessToken("ab"), E.INVALID_PERSONAL_ACCESS_TOKEN_NAME),
    (CreatePersonalAccessToken("a" * 31), E.INVALID_PERSONAL_ACCESS_TOKEN_NAME),
    (CreatePersonalAccessToken("a" * 30), None),
    (CreateTopic(Identifier(0), 1000, 2, 0, 0, 0, "t"), None),
    (CreateTopic(Identifier(0), 1001, 1, 0, 0, 0, "t"), E.TOO_MANY_PARTITIONS),
    (CreateTopic(Identifier(0), 1, 3, 0, 0, 0, "t"), E.INVALID_COMMAND),
    (UpdateTopic(Identifier(0), Identifier(0), 0, 0, 0, 0, "t"), E.INVALID_COMMAND),
    (CreatePartitions(Identifier(0), Identifier(0), 0), E.TOO_MANY_PARTITIONS),
    (CreatePartitions(Identifier(0), Identifier(0), 1001), E.TOO_MANY_PARTITIONS),
    (CreatePartitions(Identifier(0), Identifier(0), 1000), None),
    (DeletePartitions(Identifier(0), Identifier(0), 0), E.TOO_MANY_PARTITIONS),
    (GetClient(0), E.INVALID_CLIENT_ID),
    (GetClient(1), None),
    (GetSnapshotFile(1, [100]), None),
    (GetSnapshotFile(1, [100, 1]), E.INVALID_COMMAND),
    (GetSnapshotFile(7, [1]), E.INVALID_COMMAND),
    (GetSnapshotFile(6, [7]), E.INVALID_COMMAND),
]


@pytest.mark.parametrize(("request_value", "status"), VALIDATE)
def test_validate(request_value: object, status: E | None) -> None:
    if status is None:
        request_value.validate()  # type: ignore[attr-defined]
        return
    with pytest.raises(IggyError) as err:
        request_value.validate()  # type: ignore[attr-defined]
    assert err.value.code == status


def test_messages_key_constructor_bounds() -> None:
    for key in (b"", b"k" * 256):
        with pytest.raises(IggyError) as err:
            Partitioning.messages_key(key)
        assert err.value.code == E.INVALID_KEY_VALUE_LENGTH
    assert Partitioning.messages_key("k").encode() == h("03 01 6b")


# --- user headers -------------------------------------------------------------------------

def tlv(kind: int, value: bytes, length: int | None = None) -> bytes:
    return bytes([kind]) + (len(value) if length is None else length).to_bytes(4, "little") + value


GOOD_KEY = tlv(2, b"k")
HEADER_BLOCKS: list[tuple[bytes, E]] = [
    (tlv(0, b"k") + tlv(1, b"v"), E.INVALID_FORMAT),                 # kind 0
    (tlv(2, b"") + tlv(1, b"v"), E.INVALID_FORMAT),                  # empty field
    (tlv(1, b"x" * 256) + tlv(1, b"v"), E.INVALID_FORMAT),           # field > 255 bytes
    (GOOD_KEY, E.INVALID_FORMAT),                                    # odd TLV count
    (GOOD_KEY + tlv(1, b"v", length=3), E.INVALID_COMMAND),          # truncated value
    (GOOD_KEY + b"\x01\x01", E.INVALID_COMMAND),                     # truncated length
    (tlv(16, b"k") + tlv(1, b"v"), E.INVALID_HEADER_KIND),
    (GOOD_KEY + tlv(200, b"v"), E.INVALID_HEADER_KIND),
    (tlv(6, b"abc") + tlv(1, b"v"), E.INVALID_HEADER_KEY),           # int32 key of 3 bytes
    (GOOD_KEY + tlv(12, b"1234"), E.INVALID_HEADER_VALUE),           # uint64 value of 4 bytes
    (GOOD_KEY + tlv(3, b"ab"), E.INVALID_HEADER_VALUE),
    ((GOOD_KEY + tlv(1, b"v" * 255)) * 380, E.TOO_BIG_USER_HEADERS),  # > 100 000 bytes
    (tlv(16, b"k") + tlv(1, b"v") + b"\x02", E.INVALID_COMMAND),     # structure checked first
]


@pytest.mark.parametrize(("block", "status"), HEADER_BLOCKS)
def test_bad_header_blocks(block: bytes, status: E) -> None:
    with pytest.raises(WireError) as err:
        validate_headers(block)
    assert err.value.code == status


HEADER_VALUES = [
    (HeaderKind.RAW, b"\x00\xff"), (HeaderKind.STRING, "héllo"), (HeaderKind.BOOL, True),
    (HeaderKind.INT8, -128), (HeaderKind.INT16, -2), (HeaderKind.INT32, 2**31 - 1),
    (HeaderKind.INT64, -(2**63)), (HeaderKind.INT128, -(2**127)), (HeaderKind.UINT8, 255),
    (HeaderKind.UINT16, 65535), (HeaderKind.UINT32, 2**32 - 1), (HeaderKind.UINT64, 2**64 - 1),
    (HeaderKind.UINT128, 2**128 - 1), (HeaderKind.FLOAT32, 0.5), (HeaderKind.FLOAT64, -1.25),
]


def test_header_block_round_trip() -> None:
    values = {HeaderValue.string(f"k{i}"): HeaderValue.of(k, v) for i, (k, v) in
              enumerate(HEADER_VALUES)}
    values[HeaderValue.of(HeaderKind.UINT32, 7)] = HeaderValue.of(HeaderKind.RAW, b"x")
    block = encode_headers({("s" if k.kind == 2 and k.value == b"s" else k): v
                            for k, v in values.items()})
    assert decode_headers(block) == values
    assert [v.to_python() for v in decode_headers(block).values()][:15] == [
        v for _, v in HEADER_VALUES]
    assert encode_headers({"k": HeaderValue.string("v")}) == tlv(2, b"k") + tlv(2, b"v")
    assert decode_headers(b"") == {} and encode_headers({}) == b""
    repeated = tlv(2, b"k") + tlv(2, b"a") + tlv(2, b"k") + tlv(2, b"b")
    assert decode_headers(repeated) == {HeaderValue.string("k"): HeaderValue.string("b")}


def test_header_value_rejects_bad_python_values() -> None:
    for kind, value in ((HeaderKind.UINT8, 256), (HeaderKind.INT8, "x"), (HeaderKind.BOOL, None)):
        with pytest.raises(IggyError) as err:
            HeaderValue.of(kind, value)
        assert err.value.code == E.INVALID_HEADER_VALUE


@pytest.mark.parametrize("kind,value", [(HeaderKind.STRING, 5), (HeaderKind.STRING, None),
                                        (HeaderKind.RAW, 5), (HeaderKind.RAW, "ab"),
                                        (HeaderKind.UINT128, 1.9), (HeaderKind.INT128, "7"),
                                        (HeaderKind.INT64, True), (HeaderKind.UINT8, 1.0),
                                        (HeaderKind.FLOAT64, False), (HeaderKind.BOOL, 1)])
def test_header_value_takes_only_the_types_of_its_kind(kind, value) -> None:
    """A value of another type is INVALID_HEADER_VALUE naming both; it was an AttributeError
    (a string of a number), or converted into another value (bytes(5) five zero bytes,
    int(1.9) 1, True 1, 1 true)."""
    with pytest.raises(IggyError) as err:
        HeaderValue.of(kind, value)
    assert err.value.code == E.INVALID_HEADER_VALUE
    assert f"a {kind.name.lower()} header value must be" in str(err.value)
    with pytest.raises(IggyError):
        encode_headers({"k": HeaderValue(HeaderKind.UINT16, b"\x01")})


@pytest.mark.parametrize("kind,value", [(HeaderKind.STRING, ""), (HeaderKind.RAW, b""),
                                        (HeaderKind.STRING, "x" * 256),
                                        (HeaderKind.RAW, b"x" * 256)])
def test_header_value_refuses_a_raw_or_string_value_outside_1_to_255_bytes(kind, value) -> None:
    """As Iggy's HeaderValue (1 to 255 bytes); it was built, and the block holding it then
    refused with INVALID_FORMAT, which named neither the header nor the problem."""
    with pytest.raises(IggyError) as err:
        HeaderValue.of(kind, value)
    assert err.value.code == E.INVALID_HEADER_VALUE and "1 to 255" in str(err.value)


def test_header_value_takes_raw_and_string_values_of_1_and_255_bytes() -> None:
    for size in (1, 255):
        assert HeaderValue.of(HeaderKind.STRING, "x" * size).value == b"x" * size
        assert HeaderValue.of(HeaderKind.RAW, b"x" * size).value == b"x" * size


# --- polled messages ----------------------------------------------------------------------

def test_iter_messages_stops_silently_at_a_truncated_tail() -> None:
    messages = [Message(offset=i, payload=b"p" * i, user_headers=b"h" * (i % 2)) for i in range(4)]
    data = Message.encode_list(messages)
    assert list(iter_messages(data)) == messages
    ends = [sum(m.size_bytes for m in messages[:i + 1]) for i in range(4)]
    for cut in range(len(data)):
        complete = sum(1 for end in ends if end <= cut)
        assert list(iter_messages(data[:cut])) == messages[:complete]


def test_iter_messages_rejects_non_zero_reserved() -> None:
    data = bytearray(Message(payload=b"x").encode())
    data[56] = 9
    with pytest.raises(WireError) as err:
        list(PolledMessages(0, 0, 1, memoryview(bytes(data))).messages())
    assert err.value.code == E.INVALID_RESERVED_FIELD


def test_empty_poll_reply_is_the_16_byte_prefix() -> None:
    assert PolledMessages(3, 7, 0).encode() == h("03000000 0700000000000000 00000000")
    with pytest.raises(WireError):
        decode_response(100, b"")


# --- frames -------------------------------------------------------------------------------

MAX_CONTROL_PAYLOAD_BYTES = 10 * 1024 * 1024  # the 0.8 server's limit, [limits] default


def _first_frame(data: bytes) -> tuple[Frame | BadFrame | None, bytes]:
    """What the one request framing (core.connection.framing) makes of ``data`` first,
    and the bytes it has not returned as a frame."""
    reader = FrameReader(FrameLimits(MAX_CONTROL_PAYLOAD_BYTES, 2**40, 2**40))
    reader.feed(data)
    return reader.next_frame(), reader.unhandled


def test_request_frames() -> None:
    frame = encode_request(202, h("02 7331"))
    assert frame[:8] == h("07000000 ca000000")  # length counts the code, then the code
    got, rest = _first_frame(frame + b"\x01")
    assert isinstance(got, Frame) and (got.code, bytes(got.payload)) == (202, h("027331"))
    assert rest == b"\x01"
    assert _first_frame(frame[:10])[0] is None and _first_frame(frame[:7])[0] is None
    refused, _ = _first_frame(h("03000000 01000000"))
    assert isinstance(refused, BadFrame) and refused.status == E.INVALID_COMMAND
    assert not refused.fatal
    assert _first_frame(b"\x04\x00\x00")[0] is None  # 5 more header bytes needed
    big = (MAX_CONTROL_PAYLOAD_BYTES + 5).to_bytes(4, "little")
    refused, _ = _first_frame(big + (202).to_bytes(4, "little"))
    assert isinstance(refused, BadFrame) and refused.status == E.INVALID_COMMAND
    assert _first_frame(big + (101).to_bytes(4, "little"))[0] is None  # SendMessages: no cap
    at_cap = (MAX_CONTROL_PAYLOAD_BYTES + 4).to_bytes(4, "little")
    assert _first_frame(at_cap + (202).to_bytes(4, "little"))[0] is None


def test_response_frames() -> None:
    assert decode_response_header(h("f4030000 00000000")) == (1012, 0)
    with pytest.raises(ValueError):
        encode_response(0, b"x")
    with pytest.raises(ValueError):
        encode_response(1012, b"xx")
    ok = encode_response(0, b"abcd")
    assert split_response(ok + b"z") == (0, memoryview(b"abcd"), 12)
    assert split_response(ok[:11]) is None
    # the 0.8 clients read no payload bytes when length <= 1 or status != 0
    assert split_response(h("00000000 01000000 ff")) == (0, memoryview(b""), 8)
    assert split_response(h("f4030000 04000000")) == (1012, memoryview(b""), 8)


# --- command table ------------------------------------------------------------------------

def test_command_table() -> None:
    assert sorted(COMMANDS) == [1, 10, 11, 12, 20, 21, 22, 31, 32, 33, 34, 35, 36, 37, 38, 39,
                                41, 42, 43, 44, 100, 101, 102, 120, 121, 122, 200, 201, 202,
                                203, 204, 205, 300, 301, 302, 303, 304, 305, 402, 403, 503,
                                600, 601, 602, 603, 604, 605]
    assert by_name["create_stream"].code == 202
    assert by_name["login_with_personal_access_token"].code == 44
    assert all(spec.request.CODE == code for code, spec in COMMANDS.items())
    optional = {code for code, spec in COMMANDS.items() if spec.response_optional}
    assert optional == {21, 31, 120, 200, 300, 600}
    with pytest.raises(WireError) as err:
        decode_request(13, b"")
    assert err.value.code == E.INVALID_COMMAND
    assert decode_response(200, b"") is None and decode_response(201, b"") == []
    assert decode_response(101, b"") is None


def test_send_messages_keeps_the_batch_bytes() -> None:
    request = SendMessages(Identifier(1), Identifier(2), Partitioning.balanced(), BATCH)
    decoded = decode_request(101, request.encode())
    assert bytes(decoded.batch.index) == bytes(BATCH.index)
    assert bytes(decoded.batch.blob) == bytes(BATCH.blob)
    assert raw_batch([]).count == 0
    consumer = Consumer.of("c", group=True)
    assert consumer.is_group and not Consumer.of(1).is_group
    assert PollingStrategy.timestamp(5).encode() == h("02 0500000000000000")
