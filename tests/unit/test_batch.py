"""MessageBatch: exact client bytes, validation codes, stamping, index entries, header reads."""

from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from lurcher.core.wire.batch import (
    HEADER_BYTES,
    INDEX_DTYPE,
    MessageBatch,
    checksums,
    read_offsets,
    read_timestamps,
)
from lurcher.core.wire import batch as batch_module
from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

ORIGIN = 1_700_000_000_123_456
HEADER = struct.Struct("<Q16sQQQIIQ")  # checksum, id, offset, timestamp, origin, uh, pl, reserved
assert HEADER.size == HEADER_BYTES


def encode(batch: MessageBatch) -> bytes:
    w = Writer()
    batch.write(w)
    return w.done()


def header(payload_len: int, origin: int = ORIGIN, uh_len: int = 0, id_: int = 0) -> bytes:
    return HEADER.pack(0, id_.to_bytes(16, "little"), 0, 0, origin, uh_len, payload_len, 0)


def fields(blob: bytes, start: int) -> tuple:
    return HEADER.unpack_from(blob, start)


@pytest.fixture(autouse=True, params=["native", "numpy"])
def batch_loops(request, monkeypatch) -> str:
    """Every test here runs with the C validation and stamping and with the numpy ones."""
    if request.param == "numpy":
        monkeypatch.setattr(batch_module, "_scan", batch_module.scan_numpy)
        monkeypatch.setattr(batch_module, "_stamp", batch_module.stamp_numpy)
    else:
        assert batch_module._scan is batch_module._native.scan
        assert batch_module._stamp is batch_module._native.stamp
    return request.param


# -- build ------------------------------------------------------------------------------

def test_build_gives_the_captured_send_bytes():
    batch = MessageBatch.build([b"hello", b"\x00\x01\x02"], origin_timestamp_us=ORIGIN)
    expected = bytes.fromhex(
        "02000000"
        "00000000" "45000000" "0000000000000000"
        "00000000" "88000000" "0000000000000000"
    ) + header(5) + b"hello" + header(3) + b"\x00\x01\x02"
    assert encode(batch) == expected


def test_build_places_ids_and_user_headers():
    ids = [0, (1 << 127) | 5, 7]
    uh = [b"", b"\x02\x01\x00\x00\x00k\x02\x01\x00\x00\x00v",
          b"\x01\x01\x00\x00\x00x\x09\x01\x00\x00\x00\x07"]
    batch = MessageBatch.build([b"a", b"bb", b""], ids=ids, user_headers=uh,
                               origin_timestamp_us=9)
    blob = bytes(batch.blob)
    starts, ends = batch.starts(), batch.ends()
    for i, (s, e) in enumerate(zip(starts, ends)):
        f = fields(blob, int(s))
        assert int.from_bytes(f[1], "little") == ids[i]
        assert f[4] == 9 and f[5] == len(uh[i])
        assert blob[int(s) + 64:int(e)] == [b"a", b"bb", b""][i] + uh[i]
    batch.validate()


def test_build_rejects_mismatched_lengths():
    with pytest.raises(ValueError):
        MessageBatch.build([b"a"], ids=[1, 2])


def test_read_round_trips_and_views():
    raw = encode(MessageBatch.build([b"x" * 10, b"y" * 3], origin_timestamp_us=1))
    batch = MessageBatch.read(Reader(raw))
    assert batch.count == 2
    assert batch.ends().tolist() == [74, 141]
    assert batch.starts().tolist() == [0, 74]
    assert encode(batch) == raw


# -- validate ---------------------------------------------------------------------------

def mutable(payloads=(b"hello", b"abc", b"z" * 20)) -> MessageBatch:
    b = MessageBatch.build(list(payloads), origin_timestamp_us=1)
    return MessageBatch(b.count, memoryview(bytearray(b.index)), memoryview(bytearray(b.blob)))


def index_of(batch: MessageBatch) -> np.ndarray:
    return np.frombuffer(batch.index, dtype=INDEX_DTYPE)


def expect(batch: MessageBatch, code: ErrorCode, **kw) -> None:
    with pytest.raises(IggyError) as info:
        batch.validate(**kw)
    assert info.value.code == code


def test_build_with_random_ids_gives_each_message_without_an_id_a_uuid4():
    ids = [0, (1 << 127) | 5, 0, 0]
    batch = MessageBatch.build([b"a", b"b", b"c", b"d"], ids=ids, random_ids=True)
    blob = bytes(batch.blob)
    raw = [fields(blob, int(s))[1] for s in batch.starts()]
    assert int.from_bytes(raw[1], "little") == ids[1]
    for given, id_raw in zip(ids, raw):
        if not given:
            assert id_raw[6] >> 4 == 4 and id_raw[8] >> 6 == 0b10   # UUIDv4 bits
    assert len(set(raw)) == 4
    stamped = batch.writable()
    stamped.stamp(0, 1)  # the server keeps ids it was given
    assert [fields(bytes(stamped.blob), int(s))[1] for s in stamped.starts()] == raw
    unset = MessageBatch.build([b"a", b"b"])
    assert all(fields(bytes(unset.blob), int(s))[1] == bytes(16) for s in unset.starts())


def test_valid_batch_passes():
    mutable().validate()


def test_empty_batch():
    expect(MessageBatch(0, memoryview(b""), memoryview(b"")), ErrorCode.INVALID_MESSAGES_COUNT)


def test_nonzero_index_offset():
    b = mutable()
    index_of(b)["offset"][1] = 3
    expect(b, ErrorCode.NON_ZERO_OFFSET)


def test_nonzero_index_timestamp():
    b = mutable()
    index_of(b)["timestamp"][2] = 1
    expect(b, ErrorCode.NON_ZERO_TIMESTAMP)


def test_decreasing_positions():
    b = mutable()
    idx = index_of(b)
    idx["position"][0] = idx["position"][1] + 1
    expect(b, ErrorCode.MISSING_INDEX)


def test_last_end_must_match_blob():
    b = mutable()
    index_of(b)["position"][2] -= 1
    expect(b, ErrorCode.INVALID_MESSAGES_SIZE)
    b2 = mutable()
    index_of(b2)["position"][2] += 1
    expect(b2, ErrorCode.INVALID_MESSAGES_SIZE)


def test_too_small_message():
    # move the boundary so the first message is 10 bytes, the second absorbs the rest
    b = mutable()
    index_of(b)["position"][0] = 10
    expect(b, ErrorCode.TOO_SMALL_MESSAGE)


def test_header_claims_more_than_slot():
    b = mutable()
    struct.pack_into("<I", b.blob, 52, 6)       # payload 6 in a 5-byte slot
    expect(b, ErrorCode.MISSING_INDEX)


def test_reserved_field_must_be_zero_and_the_error_names_the_message():
    b = mutable()
    struct.pack_into("<Q", b.blob, 69 + 56, 1)  # the second message's reserved u64
    with pytest.raises(IggyError) as info:
        b.validate()
    assert info.value.code == ErrorCode.INVALID_RESERVED_FIELD
    assert "(message 1)" in str(info.value)


def test_header_claims_less_than_slot():
    b = mutable()
    struct.pack_into("<I", b.blob, 52, 4)
    expect(b, ErrorCode.INVALID_MESSAGES_SIZE)


def test_payload_too_big():
    expect(mutable(), ErrorCode.TOO_BIG_MESSAGE_PAYLOAD, max_payload_bytes=19)
    mutable().validate(max_payload_bytes=20)


def test_user_headers_too_big():
    block = b"\x02\x01\x00\x00\x00k\x02\x01\x00\x00\x00v"  # 12 bytes, valid
    b = MessageBatch.build([b"a", b"b"], user_headers=[b"", block], origin_timestamp_us=0)
    b.validate(max_user_headers_bytes=12)
    with pytest.raises(IggyError) as info:
        b.validate(max_user_headers_bytes=11)
    assert info.value.code == ErrorCode.TOO_BIG_USER_HEADERS


# -- stamp ------------------------------------------------------------------------------

@pytest.mark.parametrize("payloads", [
    [b"a" * 8, b"b" * 16, b"c" * 0],          # every start 8-byte aligned
    [b"hello", b"\x00\x01\x02", b"x" * 13],   # unaligned starts: byte scatter path
])
def test_stamp_fills_offsets_timestamp_ids_checksums(payloads):
    ids = [0, 0xDEADBEEF_00000000_00000000_00000001, 0]
    b = MessageBatch.build(payloads, ids=ids, origin_timestamp_us=77).writable()
    b.validate()
    b.stamp(1000, 123_456)
    blob = bytes(b.blob)
    seen_ids = set()
    for i, (s, e) in enumerate(zip(b.starts().tolist(), b.ends().tolist())):
        checksum, id_raw, offset, ts, origin, uh, pl, reserved = fields(blob, s)
        assert (offset, ts, origin, pl, reserved) == (1000 + i, 123_456, 77, len(payloads[i]), 0)
        assert checksum == xxhash.xxh3_64_intdigest(blob[s + 8:e])
        assert blob[s + 64:e] == payloads[i]
        if ids[i]:
            assert int.from_bytes(id_raw, "little") == ids[i]
        else:
            assert id_raw != bytes(16)
            assert id_raw[6] >> 4 == 4 and id_raw[8] >> 6 == 0b10   # UUIDv4 bits
        seen_ids.add(id_raw)
    assert len(seen_ids) == 3
    assert b.offsets().tolist() == [1000, 1001, 1002]
    assert b.timestamps().tolist() == [123_456] * 3
    assert read_offsets(blob, b.starts()).tolist() == [1000, 1001, 1002]
    assert read_timestamps(blob, b.starts()).tolist() == [123_456] * 3


def test_stamp_does_not_touch_the_index_block():
    b = MessageBatch.build([b"abc", b"de"], origin_timestamp_us=1).writable()
    before = bytes(b.index)
    b.stamp(5, 6)
    assert bytes(b.index) == before


def test_stamp_needs_a_writable_blob():
    with pytest.raises(ValueError):
        MessageBatch.build([b"x"]).stamp(0, 0)


def test_index_entries():
    b = MessageBatch.build([b"hello", b"abc"], origin_timestamp_us=1)
    raw = b.index_entries(1000, 7, 55)
    entries = np.frombuffer(raw, dtype=INDEX_DTYPE)
    assert entries["offset"].tolist() == [7, 8]
    assert entries["position"].tolist() == [1000 + 69, 1000 + 69 + 67]
    assert entries["timestamp"].tolist() == [55, 55]


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=40), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 2),
       st.integers(0, 2**64 - 1))
def test_a_lone_message_gets_the_entry_a_batch_gives_its_first(payload, position, offset, ts):
    """The one-message path (a struct) writes what the many-message path (numpy) writes for
    the same message first in a batch, u32 wrap-around included."""
    lone = MessageBatch.build([payload], origin_timestamp_us=1)
    pair = MessageBatch.build([payload, b"next"], origin_timestamp_us=1)
    entry = lone.index_entries(position, offset, ts)
    assert len(entry) == INDEX_DTYPE.itemsize
    assert entry == pair.index_entries(position, offset, ts)[:INDEX_DTYPE.itemsize]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=30),
       st.integers(0, 2**40), st.integers(0, 2**60))
def test_build_validate_stamp_property(payloads, base, ts):
    b = MessageBatch.build(payloads, origin_timestamp_us=3).writable()
    b.validate()
    b.stamp(base, ts)
    b.validate()  # stamping touches headers only, never sizes
    assert b.offsets().tolist() == list(range(base, base + len(payloads)))
    blob = bytes(b.blob)
    for s, e, p in zip(b.starts().tolist(), b.ends().tolist(), payloads):
        assert fields(blob, s)[0] == xxhash.xxh3_64_intdigest(blob[s + 8:e])
        assert blob[s + 64:e] == p


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_decode_and_validate_never_crash(raw):
    try:
        batch = MessageBatch.read(Reader(raw))
        batch.validate()
    except IggyError:
        pass


# -- checksums over one blob --------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=300), min_size=0, max_size=40), st.binary(max_size=16))
def test_checksums_equal_per_message_reference(bodies, prefix):
    """checksums() over a whole blob equals XXH3-64 (seed 0) of each message's bytes [8, size),
    whatever the slot sizes and alignment (a prefix shifts every slot off 8-byte alignment)."""
    sizes = [HEADER_BYTES + len(b) for b in bodies]
    blob = bytearray(prefix)
    for size, body in zip(sizes, bodies):
        blob += bytes(range(HEADER_BYTES))[:HEADER_BYTES] + body
    ends = np.cumsum([len(prefix) + sizes[0]] + sizes[1:], dtype=np.int64) if sizes else \
        np.zeros(0, dtype=np.int64)
    starts = ends - np.asarray(sizes, dtype=np.int64)
    got = checksums(bytes(blob), starts, ends)
    want = [xxhash.xxh3_64_intdigest(bytes(blob[s + 8:e])) for s, e in zip(starts.tolist(), ends.tolist())]
    assert got.dtype == np.uint64 and got.tolist() == want


def test_the_install_built_the_one_call_checksum_helper():
    """A machine with a C compiler (every CI and developer machine here) hashes a batch in
    one call; the Python loop is only the fallback for installs without one."""
    assert batch_module.NATIVE_CHECKSUMS, "lurcher/core/wire/_batchhash was not built"


def test_the_helper_hashes_through_xxhashs_cpu_dispatch_where_the_build_has_it():
    """xxhash's x86 builds export XXH3_64bits_dispatch (AVX512, AVX2 or SSE2, picked at run
    time); plain XXH3_64bits is the baseline build, 1.5-2x slower on a 1 KB message."""
    from xxhash import _xxhash
    exported = hasattr(ctypes.CDLL(_xxhash.__file__), "XXH3_64bits_dispatch")
    want = "XXH3_64bits_dispatch" if exported else "XXH3_64bits"
    assert batch_module.CHECKSUM_SYMBOL == want


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from([0, 1, 16, 17, 128, 129, 240, 241, 1023, 1024, 1025, 4096,
                                 70_000]), min_size=1, max_size=12))
def test_native_checksums_match_xxhash_on_every_length_class(lengths):
    """XXH3 takes a different path below 17, 129 and 241 bytes and per 1 KB block above;
    the dispatched entry must give xxhash's digests on each."""
    rng = np.random.default_rng(len(lengths))
    bodies = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in lengths]
    blob = b"".join(bytes(HEADER_BYTES) + b for b in bodies)
    sizes = np.asarray([HEADER_BYTES + len(b) for b in bodies], dtype=np.int64)
    ends = np.cumsum(sizes, dtype=np.int64)
    got = checksums(memoryview(blob), ends - sizes, ends).tolist()
    assert got == [xxhash.xxh3_64_intdigest(blob[e - s + 8:e])
                   for s, e in zip(sizes.tolist(), ends.tolist())]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=20))
def test_fallback_and_native_checksums_agree(bodies):
    blob = b"".join(bytes(HEADER_BYTES) + b for b in bodies)
    sizes = np.asarray([HEADER_BYTES + len(b) for b in bodies], dtype=np.int64)
    ends = np.cumsum(sizes, dtype=np.int64)
    native = checksums(memoryview(blob), ends - sizes, ends)
    saved, batch_module._native = batch_module._native, None
    try:
        fallback = checksums(memoryview(blob), ends - sizes, ends)
    finally:
        batch_module._native = saved
    assert native.tolist() == fallback.tolist()


def test_native_checksums_refuse_ranges_outside_the_buffer():
    out = np.empty(1, dtype=np.uint64)
    for start, end in ((-1, 4), (5, 4), (0, 65)):
        with pytest.raises(ValueError, match="outside a 64-byte buffer"):
            batch_module._native.xxh3_ranges(bytes(64), np.array([start], dtype=np.int64),
                                             np.array([end], dtype=np.int64), out)


# -- the C loops against the numpy ones -----------------------------------------------------

def _corrupt(blob: bytearray, index: bytearray, rule: int, where: int, value: int) -> None:
    """Change one field of one message or index entry (``rule`` picks which)."""
    n = len(index) // 16
    i = where % n
    if rule == 0:      # an index entry's relative offset, end position or timestamp
        struct.pack_into("<I", index, i * 16 + 4 * (value % 2), value)
    elif rule == 1:
        struct.pack_into("<Q", index, i * 16 + 8, value)
    else:              # a header's user-headers length, payload length or reserved field
        start = 0 if i == 0 else struct.unpack_from("<I", index, (i - 1) * 16 + 4)[0]
        at = (48, 52, 56)[rule - 2]
        if start + at + 8 <= len(blob):
            struct.pack_into("<I" if at < 56 else "<Q", blob, start + at, value)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=60), min_size=1, max_size=12),
       st.lists(st.tuples(st.integers(0, 4), st.integers(0, 50), st.integers(0, 2**32 - 1)),
                max_size=3),
       st.integers(0, 100), st.integers(0, 100))
def test_native_and_numpy_scans_agree(payloads, corruptions, max_payload, max_user_headers):
    b = MessageBatch.build(payloads, origin_timestamp_us=9)
    blob, index = bytearray(b.blob), bytearray(b.index)
    for rule, where, value in corruptions:
        _corrupt(blob, index, rule, where, value)
    native = batch_module._native.scan(bytes(index), bytes(blob), max_payload, max_user_headers)
    numpy = batch_module.scan_numpy(bytes(index), bytes(blob), max_payload, max_user_headers)
    assert native == numpy


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=20), st.booleans(),
       st.lists(st.integers(0, 2**128 - 1), min_size=20, max_size=20),
       st.integers(0, 2**40), st.integers(0, 2**60), st.integers(0, 7))
def test_native_and_numpy_stamps_write_the_same_bytes(payloads, keep_ids, ids, base, ts, pad):
    ids = ids[:len(payloads)] if keep_ids else None
    b = MessageBatch.build(payloads, ids=ids, origin_timestamp_us=5)
    shifted = np.frombuffer(b.index, dtype=INDEX_DTYPE).copy()
    shifted["position"] += pad  # a prefix (in the first slot) moves later headers off alignment
    blob = bytes(pad) + bytes(b.blob)
    randoms = np.random.default_rng(base).integers(0, 2**64, 2 * len(payloads), dtype=np.uint64)
    native, numpy = bytearray(blob), bytearray(blob)
    batch_module._native.stamp(native, shifted.tobytes(), base, ts, randoms)
    batch_module.stamp_numpy(numpy, shifted.tobytes(), base, ts, randoms)
    assert native == numpy


def test_native_stamp_refuses_slots_outside_the_blob_or_without_a_header():
    b = MessageBatch.build([b"abc", b"defgh"], origin_timestamp_us=1)
    randoms = np.zeros(4, dtype=np.uint64)
    index = np.frombuffer(b.index, dtype=INDEX_DTYPE).copy()
    for position in (len(b.blob) + 1, 10):
        index[1]["position"] = position
        with pytest.raises(ValueError, match="not a valid slot"):
            batch_module._native.stamp(bytearray(b.blob), index.tobytes(), 0, 0, randoms)
    with pytest.raises(ValueError, match="16 bytes each"):
        batch_module._native.stamp(bytearray(b.blob), b.index, 0, 0, randoms[:2])

