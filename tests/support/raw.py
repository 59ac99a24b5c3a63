"""A tiny raw-socket Iggy 0.8 client for tests that must send bytes the SDKs never would.

Owns: frame I/O with timeouts (request ``length u32, code u32, payload``; response
``status u32, length u32, payload``) and byte builders for the few payloads the tests need
(identifiers, names, partitioning, messages with user headers, SendMessages, PollMessages).
Deliberately independent of ``lurcher.core.wire``: it is the oracle the server is checked
against, so it is written straight from the wire reference with ``struct``.

Invariants: one request in flight per connection (the protocol has no pipelining);
every read is bounded by the socket timeout; a peer close is reported as ``PeerClosed``.
"""

from __future__ import annotations

import dataclasses
import socket
import struct
from collections.abc import Iterable, Sequence

import xxhash

PING = 1
GET_STATS = 10
LOGIN_USER = 38
LOGOUT_USER = 39
POLL_MESSAGES = 100
SEND_MESSAGES = 101
GET_STREAM = 200
GET_STREAMS = 201
CREATE_STREAM = 202
GET_TOPIC = 300
CREATE_TOPIC = 302

CONTROL_PAYLOAD_MAX_BYTES = 10 * 1024 * 1024
MESSAGE_HEADER_BYTES = 64
INDEX_ENTRY_BYTES = 16

STRATEGY_OFFSET = 1
STRATEGY_TIMESTAMP = 2
STRATEGY_FIRST = 3
STRATEGY_LAST = 4
STRATEGY_NEXT = 5

HEADER_KIND_RAW = 1
HEADER_KIND_STRING = 2
HEADER_KIND_BOOL = 3
HEADER_KIND_UINT32 = 11
HEADER_KIND_UINT64 = 12
HEADER_KIND_FLOAT64 = 15

_MSG_HEADER = struct.Struct("<Q16sQQQIIQ")
assert _MSG_HEADER.size == MESSAGE_HEADER_BYTES
_RESPONSE_HEADER = struct.Struct("<II")
_POLL_PREFIX = struct.Struct("<IQI")


class PeerClosed(ConnectionError):
    """The server closed the connection (EOF or reset) while a response was expected."""


class StatusError(Exception):
    """A request answered with a non-zero status."""

    def __init__(self, code: int, status: int) -> None:
        super().__init__(f"command {code} answered status {status}")
        self.code = code
        self.status = status


# ---------------------------------------------------------------- byte builders


def ident(value: int | str) -> bytes:
    """Identifier: int -> numeric (kind 1, length 4); str -> string (kind 2)."""
    if isinstance(value, int):
        return struct.pack("<BBI", 1, 4, value)
    data = value.encode()
    return struct.pack("<BB", 2, len(data)) + data


def ident_raw(kind: int, value: bytes, length: int | None = None) -> bytes:
    """An identifier with arbitrary kind/length (for invalid-input tests)."""
    return struct.pack("<BB", kind, len(value) if length is None else length) + value


def name(value: str | bytes) -> bytes:
    """name(u8): 1-byte length + bytes (no validation)."""
    data = value.encode() if isinstance(value, str) else value
    return bytes([len(data)]) + data


def partition_balanced() -> bytes:
    return b"\x01\x00"


def partition_id(partition: int) -> bytes:
    return struct.pack("<BBI", 2, 4, partition)


def partition_key(key: bytes) -> bytes:
    return struct.pack("<BB", 3, len(key)) + key


def user_headers(pairs: Iterable[tuple[int, bytes, int, bytes]]) -> bytes:
    """User-headers block: per pair ``key_kind u8, key_len u32, key, value_kind u8, value_len u32, value``."""
    out = bytearray()
    for key_kind, key, value_kind, value in pairs:
        out += struct.pack("<BI", key_kind, len(key)) + key
        out += struct.pack("<BI", value_kind, len(value)) + value
    return bytes(out)


def message(
    payload: bytes,
    *,
    message_id: int = 0,
    headers: bytes = b"",
    origin_timestamp: int = 0,
    payload_length: int | None = None,
    headers_length: int | None = None,
    checksum: int = 0,
    offset: int = 0,
    timestamp: int = 0,
    reserved: int = 0,
) -> bytes:
    """One message as a client sends it: 64-byte header, payload, user headers."""
    header = _MSG_HEADER.pack(
        checksum,
        message_id.to_bytes(16, "little"),
        offset,
        timestamp,
        origin_timestamp,
        len(headers) if headers_length is None else headers_length,
        len(payload) if payload_length is None else payload_length,
        reserved,
    )
    return header + payload + headers


def index_block(messages: Sequence[bytes]) -> bytes:
    """Index entries as clients send them: (0, cumulative end position, 0)."""
    out = bytearray()
    end = 0
    for msg in messages:
        end += len(msg)
        out += struct.pack("<IIQ", 0, end, 0)
    return bytes(out)


def send_messages_payload(
    stream: int | str,
    topic: int | str,
    partitioning: bytes,
    messages: Sequence[bytes],
    *,
    count: int | None = None,
    index: bytes | None = None,
    metadata_length: int | None = None,
) -> bytes:
    """SendMessages (101) payload; ``count``/``index``/``metadata_length`` override for bad input."""
    n = len(messages) if count is None else count
    meta = ident(stream) + ident(topic) + partitioning + struct.pack("<I", n)
    meta_len = len(meta) if metadata_length is None else metadata_length
    idx = index_block(messages) if index is None else index
    return struct.pack("<I", meta_len) + meta + idx + b"".join(messages)


def poll_payload(
    stream: int | str,
    topic: int | str,
    partition: int | None,
    strategy: int,
    value: int,
    count: int,
    auto_commit: bool = False,
    consumer: bytes = b"\x01" + ident(0),
) -> bytes:
    """PollMessages (100) payload (consumer defaults to plain consumer id 0)."""
    part = struct.pack("<BI", 0, 0) if partition is None else struct.pack("<BI", 1, partition)
    return (
        consumer + ident(stream) + ident(topic) + part
        + struct.pack("<BQIB", strategy, value, count, int(auto_commit))
    )


def login_payload(username: str, password: str) -> bytes:
    return name(username) + name(password) + struct.pack("<I", 0) + struct.pack("<I", 0)


def create_topic_payload(stream: int | str, topic_name: str, partitions: int) -> bytes:
    """CreateTopic (302): compression none, server-default expiry/size, rf 0."""
    return ident(stream) + struct.pack("<IBQQB", partitions, 1, 0, 0, 0) + name(topic_name)


# ---------------------------------------------------------------- decoders


@dataclasses.dataclass(frozen=True)
class Response:
    status: int
    length: int
    payload: bytes


@dataclasses.dataclass(frozen=True)
class PolledMessage:
    raw: bytes
    checksum: int
    message_id: int
    offset: int
    timestamp: int
    origin_timestamp: int
    headers_length: int
    payload_length: int
    reserved: int
    payload: bytes
    headers: bytes

    def checksum_ok(self) -> bool:
        """The stored checksum is XXH3-64 (seed 0) of everything after the checksum field."""
        return self.checksum == xxhash.xxh3_64_intdigest(self.raw[8:])


@dataclasses.dataclass(frozen=True)
class PollResult:
    partition_id: int
    current_offset: int
    count: int
    messages: list[PolledMessage]


def parse_messages(blob: bytes | memoryview, *, strict: bool = True) -> list[PolledMessage]:
    """Messages back to back (§9.1). ``strict`` raises ValueError on a torn tail."""
    blob = bytes(blob)
    out: list[PolledMessage] = []
    pos = 0
    while pos < len(blob):
        if len(blob) - pos < MESSAGE_HEADER_BYTES:
            if strict:
                raise ValueError(f"torn header at byte {pos}: {len(blob) - pos} bytes left")
            break
        fields = _MSG_HEADER.unpack_from(blob, pos)
        checksum, mid, offset, ts, origin, hlen, plen, reserved = fields
        end = pos + MESSAGE_HEADER_BYTES + plen + hlen
        if end > len(blob):
            if strict:
                raise ValueError(f"torn message at byte {pos}: needs {end - pos}, has {len(blob) - pos}")
            break
        body = pos + MESSAGE_HEADER_BYTES
        out.append(PolledMessage(
            raw=blob[pos:end], checksum=checksum, message_id=int.from_bytes(mid, "little"),
            offset=offset, timestamp=ts, origin_timestamp=origin, headers_length=hlen,
            payload_length=plen, reserved=reserved, payload=blob[body:body + plen],
            headers=blob[body + plen:end],
        ))
        pos = end
    return out


def parse_poll(payload: bytes) -> PollResult:
    """PollMessages response: ``partition_id u32, current_offset u64, count u32`` then messages."""
    if len(payload) < _POLL_PREFIX.size:
        raise ValueError(f"poll response shorter than its 16-byte prefix: {len(payload)}")
    partition, current, count = _POLL_PREFIX.unpack_from(payload, 0)
    return PollResult(partition, current, count, parse_messages(payload[_POLL_PREFIX.size:]))


def parse_id_u32(payload: bytes) -> int:
    """The leading ``id u32`` of a stream/topic header."""
    return struct.unpack_from("<I", payload, 0)[0]


# ---------------------------------------------------------------- the client


def _split_address(address: str | tuple[str, int]) -> tuple[str, int]:
    if isinstance(address, tuple):
        return address
    host, _, port = address.rpartition(":")
    return host, int(port)


class RawClient:
    """One TCP connection speaking raw frames. Raises PeerClosed, socket.timeout, StatusError."""

    def __init__(self, address: str | tuple[str, int], timeout_s: float = 10.0) -> None:
        self.address = _split_address(address)
        self.sock = socket.create_connection(self.address, timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout_s)

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    # -- frames

    def send_bytes(self, data: bytes) -> None:
        """Write raw bytes. Raises PeerClosed if the server already closed."""
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise PeerClosed(str(exc)) from exc

    def send_frame(self, code: int, payload: bytes = b"", *, length: int | None = None) -> None:
        """A request frame; ``length`` overrides the header's length field (default 4 + payload)."""
        length = 4 + len(payload) if length is None else length
        self.send_bytes(struct.pack("<II", length, code) + payload)

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            except ConnectionResetError as exc:
                raise PeerClosed(str(exc)) from exc
            if not chunk:
                raise PeerClosed(f"EOF after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def read_response(self, timeout_s: float | None = None) -> Response:
        """One response frame. Raises PeerClosed, TimeoutError."""
        if timeout_s is not None:
            self.sock.settimeout(timeout_s)
        status, length = _RESPONSE_HEADER.unpack(self._recv_exact(8))
        payload = self._recv_exact(length) if length else b""
        return Response(status, length, payload)

    def request(self, code: int, payload: bytes = b"") -> Response:
        self.send_frame(code, payload)
        return self.read_response()

    def call(self, code: int, payload: bytes = b"") -> bytes:
        """Request that must succeed; returns the payload. Raises StatusError."""
        resp = self.request(code, payload)
        if resp.status != 0:
            raise StatusError(code, resp.status)
        return resp.payload

    def closed_by_peer(self, wait_s: float = 2.0) -> bool:
        """True if the server closes the connection within ``wait_s`` without sending anything."""
        self.sock.settimeout(wait_s)
        try:
            data = self.sock.recv(1)
        except ConnectionResetError:
            return True
        except (TimeoutError, socket.timeout):
            return False
        if data:
            raise AssertionError(f"unexpected byte from server: {data!r}")
        return True

    # -- commands

    def ping(self) -> None:
        self.call(PING)

    def login(self, username: str = "iggy", password: str = "iggy") -> int:
        return parse_id_u32(self.call(LOGIN_USER, login_payload(username, password)))

    def create_stream(self, stream_name: str) -> int:
        return parse_id_u32(self.call(CREATE_STREAM, name(stream_name)))

    def create_topic(self, stream: int | str, topic_name: str, partitions: int) -> int:
        return parse_id_u32(self.call(CREATE_TOPIC, create_topic_payload(stream, topic_name, partitions)))

    def send(self, stream: int | str, topic: int | str, partitioning: bytes,
             messages: Sequence[bytes]) -> None:
        self.call(SEND_MESSAGES, send_messages_payload(stream, topic, partitioning, messages))

    def poll(self, stream: int | str, topic: int | str, partition: int | None,
             strategy: int = STRATEGY_OFFSET, value: int = 0, count: int = 1000,
             auto_commit: bool = False, consumer: bytes = b"\x01" + ident(0)) -> PollResult:
        payload = poll_payload(stream, topic, partition, strategy, value, count, auto_commit, consumer)
        return parse_poll(self.call(POLL_MESSAGES, payload))

    def poll_all(self, stream: int | str, topic: int | str, partition: int,
                 batch: int = 1000) -> list[PolledMessage]:
        """Every message of a partition from offset 0, by successive offset polls."""
        out: list[PolledMessage] = []
        while True:
            got = self.poll(stream, topic, partition, STRATEGY_OFFSET, len(out), batch).messages
            if not got:
                return out
            out.extend(got)


def fill_partition(address: str, stream: str, topic: str,
                   batches: Iterable[Sequence[bytes]]) -> None:
    """Log in, create ``stream`` with a one-partition ``topic``, and send each batch of
    payloads to that partition."""
    with RawClient(address, timeout_s=30) as c:
        c.login()
        c.create_stream(stream)
        c.create_topic(stream, topic, 1)
        for payloads in batches:
            c.send(stream, topic, partition_id(0), [message(p) for p in payloads])
