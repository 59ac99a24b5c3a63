"""Hostile and malformed input over raw TCP against a real server.

One module-scoped server holds reference data (stream ``keep``, topic ``t``, two partitions,
messages with and without user headers). After every test: the server process is alive,
answers Ping on a NEW connection, and the reference data polls back byte-identical. Where
the protocol can resync (the server has consumed exactly the bad frame), the SAME
connection must still answer Ping too.

Expected statuses follow the wire reference (§1.1, §4.1, §4.2, §9.3, §13); where it
leaves a choice, the accepted set is spelled out next to the case.
"""

from __future__ import annotations

import random
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import raw
from tests.support.raw import RawClient
from tests.support.server import LurcherServer

KEEP_STREAM = "keep"
KEEP_TOPIC = "t"
KEEP_PARTITIONS = 2
SCRATCH_STREAM = "scratch"

INVALID_COMMAND = 3
INVALID_FORMAT = 4
UNAUTHENTICATED = 40
PARTITION_NOT_FOUND = 3007
INVALID_MESSAGES_COUNT = 4009
TOO_BIG_USER_HEADERS = 4017
TOO_BIG_MESSAGE_PAYLOAD = 4022
NON_ZERO_OFFSET = 4031
NON_ZERO_TIMESTAMP = 4032
INVALID_MESSAGES_SIZE = 4036
# A batch whose index and blob disagree: the 0.8 server reports whichever check fails
# first (missing index 4033, index/count 4034/4035, blob size 4036, payload length 4025,
# too-small message 4037, message count 4009) or 3/4 from the frame decoder.
BATCH_INCONSISTENT = {3, 4, 4009, 4025, 4033, 4034, 4035, 4036, 4037}
# Whatever an invalid identifier/name may map to (wire §13: 3 undecodable, 4 invalid, 81 UTF-8).
DECODE_ERRORS = {INVALID_COMMAND, INVALID_FORMAT}
# SendMessages metadata is parsed by the 0.8 server with its own identifier reader, which
# reports InvalidIdentifier (6).
SEND_META_ERRORS = DECODE_ERRORS | {6}

# Commands that cannot destroy the reference data, used by the structured fuzz.
FUZZ_CODES = [1, 10, 12, 20, 21, 22, 31, 32, 33, 38, 41, 42, 43, 44, 100, 102, 120, 121, 122,
              200, 201, 202, 300, 301, 302, 600, 601, 602, 603, 604, 605, 7, 13, 99, 999]


@dataclass
class Env:
    server: LurcherServer
    baseline: dict[int, list[bytes]]

    def connect(self, login: bool = True) -> RawClient:
        c = RawClient(self.server.tcp_address, timeout_s=10.0)
        if login:
            c.login()
        return c


def reference_messages(partition: int) -> list[list[bytes]]:
    """Three batches per partition; every other message carries user headers."""
    batches = []
    for b in range(3):
        batch = []
        for i in range(7):
            hdr = raw.user_headers([(raw.HEADER_KIND_STRING, b"k", raw.HEADER_KIND_UINT32,
                                     struct.pack("<I", b * 100 + i))]) if i % 2 else b""
            batch.append(raw.message(f"ref-{partition}-{b}-{i}".encode() * (i + 1), headers=hdr,
                                     origin_timestamp=123456789 + i))
        batches.append(batch)
    return batches


def snapshot(c: RawClient) -> dict[int, list[bytes]]:
    return {p: [m.raw for m in c.poll_all(KEEP_STREAM, KEEP_TOPIC, p)] for p in range(KEEP_PARTITIONS)}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    server = LurcherServer().start(Path(tmp_path_factory.mktemp("bad-input")))
    try:
        with RawClient(server.tcp_address) as c:
            c.login()
            c.create_stream(KEEP_STREAM)
            c.create_topic(KEEP_STREAM, KEEP_TOPIC, KEEP_PARTITIONS)
            for p in range(KEEP_PARTITIONS):
                for batch in reference_messages(p):
                    c.send(KEEP_STREAM, KEEP_TOPIC, raw.partition_id(p), batch)
            c.create_stream(SCRATCH_STREAM)
            c.create_topic(SCRATCH_STREAM, "t", 1)
            baseline = snapshot(c)
        assert [len(v) for v in baseline.values()] == [21, 21]
        yield Env(server, baseline)
    except BaseException:
        server.kill()
        raise
    server.stop()


@pytest.fixture(autouse=True)
def still_healthy(env: Env) -> Iterator[None]:
    """After each test: alive, Ping on a new connection, reference data unchanged."""
    yield
    assert env.server.running, "server process died\n" + env.server.log_tail()
    with env.connect(login=False) as c:
        c.ping()
    with env.connect() as c:
        assert snapshot(c) == env.baseline, "reference data changed"


def expect_status(c: RawClient, allowed: int | set[int], what: str) -> int:
    """Read one response; it must be an error in ``allowed`` with an empty payload."""
    allowed = {allowed} if isinstance(allowed, int) else allowed
    resp = c.read_response()
    assert resp.status in allowed, f"{what}: expected status {sorted(allowed)}, got {resp.status}"
    if resp.status == 0:
        assert resp.payload == b"", f"{what}: OK must be the empty not-found answer"
    else:
        assert resp.length == 0, f"{what}: error response must carry length 0, got {resp.length}"
    return resp.status


def expect_status_or_close(c: RawClient, allowed: int | set[int], what: str) -> bool:
    """An error status in ``allowed`` or a closed connection. Returns True if still open."""
    try:
        expect_status(c, allowed, what)
        return True
    except raw.PeerClosed:
        return False


# ---------------------------------------------------------------- framing


def test_truncated_frames_then_close(env: Env) -> None:
    cases = [
        b"\x04\x00",                                              # half a length field
        struct.pack("<I", 4) + b"\x01\x00",                       # half a code field
        struct.pack("<II", 104, raw.PING) + b"x" * 10,            # payload short by 90
        struct.pack("<II", 4 + 50, raw.CREATE_STREAM) + raw.name("never-created"),
        struct.pack("<II", 4 + 10_000, raw.SEND_MESSAGES) + b"\x12\x00\x00\x00" + raw.ident(KEEP_STREAM),
    ]
    full_send = raw.send_messages_payload(KEEP_STREAM, KEEP_TOPIC, raw.partition_id(0),
                                          [raw.message(b"torn" * 100) for _ in range(5)])
    for cut in (4, 30, 100, len(full_send) - 1):
        cases.append(struct.pack("<II", 4 + len(full_send), raw.SEND_MESSAGES) + full_send[:cut])
    for data in cases:
        with env.connect() as c:
            c.send_bytes(data)
    with env.connect() as c:
        assert c.request(raw.GET_STREAM, raw.ident("never-created")).payload == b"", \
            "a truncated CreateStream must not create the stream"


def test_length_below_four_is_invalid_command_and_connection_survives(env: Env) -> None:
    with env.connect() as c:
        for length in (0, 1, 2, 3):
            c.send_bytes(struct.pack("<II", length, raw.PING))
            expect_status(c, INVALID_COMMAND, f"frame length {length}")
            c.ping()


def test_unknown_codes_are_invalid_command(env: Env) -> None:
    with env.connect() as c:
        for code in (0, 2, 3, 13, 99, 103, 123, 206, 306, 400, 401, 404, 500, 606, 9999, 0xFFFFFFFF):
            c.send_frame(code)
            expect_status(c, INVALID_COMMAND, f"unknown code {code}")
            c.send_frame(code, b"\xab" * 37)
            expect_status(c, INVALID_COMMAND, f"unknown code {code} with payload")
            c.ping()


def test_unknown_code_before_login(env: Env) -> None:
    with env.connect(login=False) as c:
        c.send_frame(4242, b"zz")
        expect_status(c, {INVALID_COMMAND, UNAUTHENTICATED}, "unknown code, unauthenticated")
        c.ping()


def test_control_frame_of_exactly_ten_mib_is_accepted(env: Env) -> None:
    with env.connect() as c:
        c.send_frame(raw.PING, bytes(raw.CONTROL_PAYLOAD_MAX_BYTES))
        resp = c.read_response()
        assert (resp.status, resp.length) == (0, 0), "10 MiB ping payload: trailing bytes are ignored"
        c.ping()


def test_control_frame_over_ten_mib_is_rejected(env: Env) -> None:
    for code in (raw.PING, raw.CREATE_STREAM, raw.GET_STREAMS, 4242):
        with env.connect() as c:
            c.send_frame(code, length=4 + raw.CONTROL_PAYLOAD_MAX_BYTES + 1)
            expect_status_or_close(c, INVALID_COMMAND, f"code {code} with 10 MiB + 1 payload")
    with env.connect() as c:
        c.send_frame(raw.PING, length=0xFFFFFFFF)
        expect_status_or_close(c, INVALID_COMMAND, "length u32::MAX")


def test_random_garbage_gets_errors_or_a_close(env: Env) -> None:
    rng = random.Random(1234)
    for round_ in range(25):
        with env.connect(login=round_ % 2 == 0) as c:
            data = rng.randbytes(rng.randrange(1, 400))
            try:
                c.send_bytes(data)
            except raw.PeerClosed:
                continue
            try:
                while True:
                    resp = c.read_response(timeout_s=0.2)
                    assert resp.status != 0, f"round {round_}: garbage {data[:16].hex()} answered OK"
            except (raw.PeerClosed, TimeoutError, socket.timeout):
                pass


def test_structured_fuzz_every_frame_gets_one_answer(env: Env) -> None:
    """Well-framed requests with random payloads: one response each, then the connection resyncs."""
    rng = random.Random(99)
    with env.connect() as c:
        for round_ in range(400):
            code = rng.choice(FUZZ_CODES)
            payload = rng.randbytes(rng.choice([0, 1, 2, 5, rng.randrange(0, 80)]))
            c.send_frame(code, payload)
            resp = c.read_response()
            if resp.status != 0:
                assert resp.length == 0, f"round {round_} code {code}: error with payload"
            c.ping()
            if code in (38, 44) and resp.status != 0:
                c.login()


# ---------------------------------------------------------------- identifiers and names


UTF8_IDENT_OUTCOMES = DECODE_ERRORS | {0, 81, 1009, 1010, 2010, 2011}

BAD_IDENTIFIERS = [
    ("kind 3", raw.ident_raw(3, b"\x00\x00\x00\x00"), DECODE_ERRORS),
    ("kind 0", raw.ident_raw(0, b"\x00\x00\x00\x00"), DECODE_ERRORS),
    ("numeric length 2", raw.ident_raw(1, b"\x00\x00"), INVALID_FORMAT),
    ("numeric length 8", raw.ident_raw(1, bytes(8)), INVALID_FORMAT),
    ("empty string", raw.ident_raw(2, b""), INVALID_FORMAT),
    # invalid UTF-8 may also be looked up and simply not found (0.8 does not validate it)
    ("string invalid UTF-8", raw.ident_raw(2, b"\xff\xfe"), UTF8_IDENT_OUTCOMES),
    # truncated identifiers: only meaningful as the last field of a payload
    ("string shorter than its length", raw.ident_raw(2, b"abc", length=10), INVALID_COMMAND),
    ("numeric value missing", raw.ident_raw(1, b"", length=4), INVALID_COMMAND),
    ("nothing at all", b"", INVALID_COMMAND),
    ("kind only", b"\x01", INVALID_COMMAND),
]


@pytest.mark.parametrize("label,bad,allowed", BAD_IDENTIFIERS, ids=[b[0] for b in BAD_IDENTIFIERS])
def test_invalid_identifiers(env: Env, label: str, bad: bytes, allowed: int | set[int]) -> None:
    frames = [(raw.GET_STREAM, bad), (raw.GET_TOPIC, raw.ident(KEEP_STREAM) + bad)]
    if allowed != INVALID_COMMAND:
        frames += [
            (raw.CREATE_TOPIC, bad + struct.pack("<IBQQB", 1, 1, 0, 0, 0) + raw.name("x")),
            (raw.POLL_MESSAGES, b"\x01" + raw.ident(0) + raw.ident(KEEP_STREAM) + bad
             + struct.pack("<BIBQIB", 1, 0, 1, 0, 10, 0)),
        ]
    with env.connect() as c:
        for code, payload in frames:
            c.send_frame(code, payload)
            expect_status(c, allowed, f"{label} in command {code}")
            c.ping()


BAD_NAMES = [
    ("empty", b"\x00", INVALID_FORMAT),
    ("shorter than its length", b"\x0aabc", INVALID_COMMAND),
    ("invalid UTF-8", b"\x02\xff\xfe", DECODE_ERRORS | {81, 1013, 2014}),
    ("missing", b"", INVALID_COMMAND),
]


@pytest.mark.parametrize("label,bad,allowed", BAD_NAMES, ids=[b[0] for b in BAD_NAMES])
def test_invalid_names(env: Env, label: str, bad: bytes, allowed: int | set[int]) -> None:
    with env.connect() as c:
        before = c.call(raw.GET_STREAMS)
        c.send_frame(raw.CREATE_STREAM, bad)
        expect_status(c, allowed, f"CreateStream name {label}")
        c.ping()
        c.send_frame(raw.CREATE_TOPIC, raw.ident(SCRATCH_STREAM) + struct.pack("<IBQQB", 1, 1, 0, 0, 0) + bad)
        expect_status(c, allowed, f"CreateTopic name {label}")
        c.ping()
        assert c.call(raw.GET_STREAMS) == before, "a rejected create must not create anything"


def test_bad_login_payloads(env: Env) -> None:
    with env.connect(login=False) as c:
        for payload, allowed in [
            (b"", INVALID_COMMAND),
            (raw.name("iggy"), INVALID_COMMAND),
            (raw.name("ig") + raw.name("iggy") + bytes(8), {42, 43, INVALID_FORMAT}),
            (raw.name("iggy") + raw.name("ig") + bytes(8), {44, 42, INVALID_FORMAT}),
            (raw.name("iggy") + raw.name("wrong") + bytes(8), 42),
        ]:
            c.send_frame(raw.LOGIN_USER, payload)
            expect_status(c, allowed, f"login payload {payload.hex()}")
            c.ping()
        c.send_frame(raw.GET_STREAMS)
        expect_status(c, UNAUTHENTICATED, "failed logins must leave the session unauthenticated")


# ---------------------------------------------------------------- authentication


def test_commands_before_login_are_unauthenticated(env: Env) -> None:
    frames = [
        (raw.GET_STREAMS, b""),
        (raw.GET_STATS, b""),
        (raw.GET_STREAM, raw.ident(KEEP_STREAM)),
        (raw.CREATE_STREAM, raw.name("sneaky")),
        (raw.POLL_MESSAGES, raw.poll_payload(KEEP_STREAM, KEEP_TOPIC, 0, raw.STRATEGY_FIRST, 0, 10)),
    ]
    with env.connect(login=False) as c:
        for code, payload in frames:
            c.send_frame(code, payload)
            expect_status(c, UNAUTHENTICATED, f"command {code} before login")
            c.ping()
        c.login()
        assert c.request(raw.GET_STREAM, raw.ident("sneaky")).payload == b""
        c.call(raw.LOGOUT_USER)
        c.send_frame(raw.GET_STREAMS)
        expect_status(c, UNAUTHENTICATED, "GetStreams after logout")
    with env.connect(login=False) as c:
        body = raw.send_messages_payload(KEEP_STREAM, KEEP_TOPIC, raw.partition_id(0), [raw.message(b"no")])
        c.send_frame(raw.SEND_MESSAGES, body)
        expect_status_or_close(c, UNAUTHENTICATED, "SendMessages before login")


# ---------------------------------------------------------------- SendMessages


def keep_send(c: RawClient, messages: list[bytes], **overrides: object) -> None:
    c.send_frame(raw.SEND_MESSAGES, raw.send_messages_payload(
        KEEP_STREAM, KEEP_TOPIC, raw.partition_id(0), messages, **overrides))  # type: ignore[arg-type]


def index_entries(entries: list[tuple[int, int, int]]) -> bytes:
    return b"".join(struct.pack("<IIQ", *e) for e in entries)


def test_zero_messages_is_invalid_messages_count(env: Env) -> None:
    with env.connect() as c:
        keep_send(c, [])
        expect_status(c, INVALID_MESSAGES_COUNT, "SendMessages with count 0")
        c.ping()


def test_index_offset_and_timestamp_must_be_zero(env: Env) -> None:
    msgs = [raw.message(b"a" * 10), raw.message(b"b" * 20)]
    ends = [74, 74 + 84]
    with env.connect() as c:
        keep_send(c, msgs, index=index_entries([(0, ends[0], 0), (1, ends[1], 0)]))
        expect_status(c, NON_ZERO_OFFSET, "index relative offset 1")
        c.ping()
        keep_send(c, msgs, index=index_entries([(0, ends[0], 0), (0, ends[1], 99)]))
        expect_status(c, NON_ZERO_TIMESTAMP, "index timestamp 99")
        c.ping()


BATCH_CASES = {
    "payload_length larger than the bytes": (
        [raw.message(b"x" * 10, payload_length=100)], None, None),
    "payload_length u32::MAX": (
        [raw.message(b"x" * 10, payload_length=0xFFFFFFFF)], None, None),
    "payload_length smaller than the bytes": (
        [raw.message(b"x" * 10, payload_length=3)], None, None),
    "headers_length larger than the bytes": (
        [raw.message(b"x" * 10, headers_length=500)], None, None),
    "index end beyond the blob": (
        [raw.message(b"x" * 10)], index_entries([(0, 200, 0)]), None),
    "index end short of the blob": (
        [raw.message(b"x" * 10), raw.message(b"y" * 10)], index_entries([(0, 74, 0), (0, 100, 0)]), None),
    "index positions decreasing": (
        [raw.message(b"x" * 10), raw.message(b"y" * 10)], index_entries([(0, 148, 0), (0, 74, 0)]), None),
    "message smaller than a header": (
        [b"\x00" * 30], index_entries([(0, 30, 0)]), None),
    "count larger than the index": (
        [raw.message(b"x" * 10)], None, 3),
    "count smaller than the messages": (
        [raw.message(b"x" * 10), raw.message(b"y" * 10)], index_entries([(0, 74, 0)]), 1),
    "blob without messages": (
        [], index_entries([(0, 74, 0)]), 1),
}


@pytest.mark.parametrize("case", list(BATCH_CASES))
def test_inconsistent_batches_are_rejected(env: Env, case: str) -> None:
    messages, index, count = BATCH_CASES[case]
    with env.connect() as c:
        overrides: dict[str, object] = {}
        if index is not None:
            overrides["index"] = index
        if count is not None:
            overrides["count"] = count
        keep_send(c, messages, **overrides)
        if expect_status_or_close(c, BATCH_INCONSISTENT, case):
            c.ping()


def test_blob_size_mismatch_is_invalid_messages_size(env: Env) -> None:
    msgs = [raw.message(b"x" * 10), raw.message(b"y" * 10)]
    with env.connect() as c:
        keep_send(c, msgs + [b"\x00" * 7], index=raw.index_block(msgs), count=2)
        expect_status(c, INVALID_MESSAGES_SIZE, "index covers 148 bytes, blob has 155")
        c.ping()


def with_metadata(head: bytes, messages: list[bytes]) -> bytes:
    """A SendMessages payload with a hand-made metadata head (identifiers + partitioning)."""
    meta = head + struct.pack("<I", len(messages))
    return struct.pack("<I", len(meta)) + meta + raw.index_block(messages) + b"".join(messages)


def test_bad_metadata(env: Env) -> None:
    good = [raw.message(b"m" * 5)]
    body = raw.send_messages_payload(KEEP_STREAM, KEEP_TOPIC, raw.partition_id(0), good)
    cases = [
        ("metadata_length beyond the frame", struct.pack("<I", 10_000) + body[4:], SEND_META_ERRORS),
        ("metadata_length too short", struct.pack("<I", 3) + body[4:], SEND_META_ERRORS | BATCH_INCONSISTENT),
        ("partitioning kind 9", raw.send_messages_payload(
            KEEP_STREAM, KEEP_TOPIC, b"\x09\x04\x00\x00\x00\x00", good), SEND_META_ERRORS),
        ("partition id with length 2", raw.send_messages_payload(
            KEEP_STREAM, KEEP_TOPIC, b"\x02\x02\x00\x00", good), SEND_META_ERRORS),
        ("balanced with length 1", raw.send_messages_payload(
            KEEP_STREAM, KEEP_TOPIC, b"\x01\x01\x00", good), SEND_META_ERRORS),
        # the 0.8 server hashes an empty key like any other: accepted, so only into scratch
        ("empty messages key", raw.send_messages_payload(
            SCRATCH_STREAM, "t", b"\x03\x00", good), SEND_META_ERRORS | {0, 4028}),
        ("bad stream identifier", with_metadata(
            raw.ident_raw(1, b"\x00\x00") + raw.ident(KEEP_TOPIC) + raw.partition_id(0), good),
         SEND_META_ERRORS | BATCH_INCONSISTENT),
    ]
    for label, payload, allowed in cases:
        with env.connect() as c:
            c.send_frame(raw.SEND_MESSAGES, payload)
            expect_status_or_close(c, allowed, label)


def test_unknown_partition_and_topic(env: Env) -> None:
    with env.connect() as c:
        c.send_frame(raw.SEND_MESSAGES, raw.send_messages_payload(
            KEEP_STREAM, KEEP_TOPIC, raw.partition_id(99), [raw.message(b"lost")]))
        expect_status(c, PARTITION_NOT_FOUND, "SendMessages to partition 99")
        c.ping()
        c.send_frame(raw.SEND_MESSAGES, raw.send_messages_payload(
            KEEP_STREAM, "no-such-topic", raw.partition_id(0), [raw.message(b"lost")]))
        expect_status(c, {2010, 2011}, "SendMessages to an unknown topic")
        c.ping()
        c.send_frame(raw.POLL_MESSAGES, raw.poll_payload(KEEP_STREAM, KEEP_TOPIC, 99, raw.STRATEGY_FIRST, 0, 1))
        expect_status(c, PARTITION_NOT_FOUND, "PollMessages from partition 99")
        c.ping()


@pytest.mark.slow
def test_too_big_payload_and_headers(env: Env) -> None:
    with env.connect() as c:
        keep_send(c, [raw.message(bytes(64_000_001))])
        expect_status(c, TOO_BIG_MESSAGE_PAYLOAD, "payload of 64 000 001 bytes")
        c.ping()
        pairs = [(raw.HEADER_KIND_STRING, f"k{i:05d}".encode(), raw.HEADER_KIND_RAW, b"v" * 200)
                 for i in range(500)]
        block = raw.user_headers(pairs)
        assert len(block) > 100_000
        keep_send(c, [raw.message(b"p", headers=block)])
        expect_status(c, TOO_BIG_USER_HEADERS, f"user headers of {len(block)} bytes")
        c.ping()
