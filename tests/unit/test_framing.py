"""FrameReader: frames split at any byte, big frames in their own buffer, refusal rules."""

import struct

import pytest

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.connection.framing import (
    PEEK_AFTER_BIG_BYTES,
    BadFrame,
    Frame,
    FrameLimits,
    FrameReader,
)

MIB = 1024 * 1024


def frame(code: int, payload: bytes) -> bytes:
    return struct.pack("<II", len(payload) + 4, code) + payload


def drain(reader: FrameReader):
    out = []
    while (f := reader.next_frame()) is not None:
        out.append((f.code, bytes(f.payload)) if isinstance(f, Frame) else f)
    return out


def reader(buffer_bytes: int = 64 * 1024) -> FrameReader:
    return FrameReader(FrameLimits(10 * MIB, 64 * MIB, 64 * 1024), initial_bytes=buffer_bytes)


@pytest.mark.parametrize("chunk", [1, 3, 7, 8, 100, 4096])
def test_frames_arrive_in_any_chunking(chunk):
    stream = b"".join(frame(c, bytes([c % 256]) * (c * 37 % 500)) for c in range(1, 60))
    r = reader(4096)
    got = []
    for i in range(0, len(stream), chunk):
        r.feed(stream[i:i + chunk])
        got += drain(r)
    assert got == [(c, bytes([c % 256]) * (c * 37 % 500)) for c in range(1, 60)]


def test_large_frame_is_read_into_its_own_buffer():
    payload = bytes(range(256)) * 4096  # 1 MiB
    r = reader()
    r.feed(frame(101, payload)[:1000])
    assert r.next_frame() is None
    assert r.big is not None and r.big_need == len(payload)
    r.feed(frame(101, payload)[1000:])
    assert drain(r) == [(101, payload)]
    assert r.big is None


def big_frame(r: FrameReader, payload: bytes) -> Frame:
    data = frame(101, payload)
    r.feed(data[:1000])
    assert r.next_frame() is None and r.big is not None  # read into a buffer of its own
    r.feed(data[1000:])
    got = r.next_frame()
    assert isinstance(got, Frame) and bytes(got.payload) == payload
    return got


def test_big_buffer_is_reused_once_nothing_references_it():
    r = reader()
    first = big_frame(r, b"a" * MIB)
    buffer_id = id(first.payload.obj)
    del first
    second = big_frame(r, b"b" * MIB)
    assert id(second.payload.obj) == buffer_id
    held = big_frame(reader(), b"c" * MIB)  # another connection of this thread
    assert held.payload.obj is not second.payload.obj
    del second
    assert id(big_frame(reader(), b"d" * MIB).payload.obj) == buffer_id


def socket_reads(r: FrameReader, data: bytes) -> list:
    """Deliver ``data`` as a socket with everything already arrived would: each read fills
    the whole buffer offered. Returns the frames, and the size of every read."""
    frames, reads, at = [], [], 0
    while at < len(data):
        target = r.get_buffer()
        n = min(len(target), len(data) - at)
        target[:n] = data[at:at + n]
        r.buffer_updated(n)
        reads.append(n)
        at += n
        frames += drain(r)
    return frames, reads


def test_after_a_big_frame_the_next_read_only_peeks_so_little_is_copied():
    first, second = b"a" * MIB, b"b" * MIB
    r = reader(256 * 1024)
    frames, reads = socket_reads(r, frame(101, first))
    assert frames == [(101, first)]
    offered = r.get_buffer()
    assert len(offered) == PEEK_AFTER_BIG_BYTES  # not the whole small buffer
    frames, reads = socket_reads(r, frame(101, second) + frame(1, b"") + frame(2, b"x" * 9000))
    assert frames == [(101, second), (1, b""), (2, b"x" * 9000)]
    assert reads[0] == PEEK_AFTER_BIG_BYTES  # at most that much copied out of the small buffer
    assert len(r.get_buffer()) > PEEK_AFTER_BIG_BYTES  # small frames since: full reads again


def test_big_buffer_still_referenced_is_not_reused():
    r = reader()
    first = big_frame(r, b"a" * MIB)
    kept = first.payload[10:20]  # a view of it lives on (e.g. a batch still in flight)
    del first
    second = big_frame(r, b"b" * MIB)
    assert second.payload.obj is not kept.obj and bytes(kept) == b"a" * 10
    different_size = big_frame(r, b"c" * (MIB + 1))
    assert different_size.payload.obj is not second.payload.obj


def test_length_below_four_is_refused_and_reading_goes_on():
    r = reader()
    r.feed(struct.pack("<II", 2, 1) + frame(1, b""))
    got = drain(r)
    assert isinstance(got[0], BadFrame) and got[0].status == ErrorCode.INVALID_COMMAND
    assert not got[0].fatal
    assert got[1] == (1, b"")


def test_oversized_control_frame_is_fatal():
    r = reader()
    r.feed(struct.pack("<II", 10 * MIB + 5, 200))
    bad = r.next_frame()
    assert isinstance(bad, BadFrame) and bad.fatal and bad.status == ErrorCode.INVALID_COMMAND


def test_send_messages_may_exceed_the_control_limit():
    r = FrameReader(FrameLimits(16, 1000, 64 * 1024))
    r.feed(frame(101, b"x" * 500))
    assert drain(r) == [(101, b"x" * 500)]


def test_unhandled_bytes_are_reported_for_migration():
    r = reader()
    data = frame(1, b"") + frame(200, b"\x01\x04\x00\x00\x00\x00")[:5]
    r.feed(data)
    assert drain(r) == [(1, b"")]
    assert r.unhandled == data[8:]
