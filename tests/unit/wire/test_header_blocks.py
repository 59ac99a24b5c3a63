"""The batch-wide user-headers check agrees with the per-block reference.

``header_blocks.validate_header_blocks`` (the C helper, or the numpy walk without it; each
test runs both) must accept exactly the blocks ``headers.validate_headers`` accepts, with
the same code for a single block, and name the right message when several blocks are
checked together.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lurcher.core.wire import header_blocks
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.header_blocks import validate_header_blocks
from lurcher.core.wire.headers import validate_headers

NATIVE = header_blocks._native
both = pytest.mark.parametrize("native", [True, False], ids=["c", "numpy"])


@contextlib.contextmanager
def implementation(native: bool) -> Iterator[None]:
    """The C helper (which the install builds) or the numpy walk, for the block."""
    assert NATIVE is not None, "lurcher/core/wire/_batchhash was not built"
    header_blocks._native = NATIVE if native else None
    try:
        yield
    finally:
        header_blocks._native = NATIVE


def code_of(fn, *args) -> ErrorCode | None:
    try:
        fn(*args)
    except IggyError as exc:
        return exc.code
    return None


def vectorised(blocks: list[bytes]) -> None:
    blob = b"".join(blocks)
    ends = np.cumsum([len(b) for b in blocks], dtype=np.int64)
    begins = ends - np.array([len(b) for b in blocks], dtype=np.int64)
    validate_header_blocks(blob, begins, ends, np.arange(len(blocks)))


fields = st.tuples(st.sampled_from([0, 1, 2, 3, 5, 9, 11, 12, 15, 16, 200]),
                   st.binary(min_size=0, max_size=20),
                   st.sampled_from([None, None, None, 0, 300, 2**32 - 1]))


def tlv_block(items: list[tuple[int, bytes, int | None]], cut: int) -> bytes:
    block = b"".join(struct.pack("<BI", k, len(v) if n is None else n) + v for k, v, n in items)
    return block[:len(block) - cut] if cut < len(block) else block


@both
@settings(max_examples=400, deadline=None)
@given(st.lists(fields, min_size=1, max_size=6), st.integers(0, 3))
def test_one_block_same_verdict_and_code_as_reference(native, items, cut) -> None:
    block = tlv_block(items, cut)
    if not block:
        return
    with implementation(native):
        assert code_of(vectorised, [block]) == code_of(validate_headers, block)


@both
@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(fields, min_size=1, max_size=4), min_size=1, max_size=8))
def test_many_blocks_fail_iff_one_fails(native, blocks_items) -> None:
    blocks = [tlv_block(items, 0) for items in blocks_items]
    blocks = [b for b in blocks if b]
    if not blocks:
        return
    reference = [code_of(validate_headers, b) for b in blocks]
    with implementation(native):
        got = code_of(vectorised, blocks)
    assert (got is None) == all(r is None for r in reference)
    if got is not None:
        assert got in set(reference)


@both
def test_error_names_the_failing_message(native) -> None:
    good = struct.pack("<BI", 2, 1) + b"k" + struct.pack("<BI", 2, 1) + b"v"
    bad = struct.pack("<BI", 2, 1) + b"k" + struct.pack("<BI", 99, 1) + b"v"
    blob = good + bad
    with implementation(native), pytest.raises(IggyError) as info:
        validate_header_blocks(blob, np.array([0, len(good)]), np.array([len(good), len(blob)]),
                               np.array([3, 8]))
    assert info.value.code == ErrorCode.INVALID_HEADER_KIND and "message 8" in str(info.value)


def test_a_batch_of_one_byte_fields_is_checked_by_the_helper() -> None:
    """Found by an audit: 640 blocks of 16,666 one-byte fields (a 64 MB batch) held the event
    loop about 2 s in the numpy walk, one pass per field. The C helper checks them block by
    block; a fault in the last field of the last block is still found."""
    pair = struct.pack("<BI", 9, 1) + b"k" + struct.pack("<BI", 9, 1) + b"v"
    block = pair * 8_333
    blocks = [block] * 640
    assert header_blocks._native is NATIVE is not None  # the helper the install built
    vectorised(blocks)
    with pytest.raises(IggyError) as info:  # the last value: a bool of 2 bytes
        vectorised(blocks[:-1] + [block[:-6] + struct.pack("<BI", 3, 2) + b"vv"])
    assert info.value.code == ErrorCode.INVALID_HEADER_VALUE and "message 639" in str(info.value)


def test_key_text_never_names_two_keys_alike() -> None:
    """A string key spelled like another kind's name ("uint32:5") must not share its text
    with that key (uint32 5): two equal keys in one Spark map row fail the read, and the MCP
    tools' JSON object kept one of them."""
    from lurcher.core.wire.headers import HeaderKind, HeaderValue, key_text
    keys = [HeaderValue.of(HeaderKind.UINT32, 5), HeaderValue.string("uint32:5"),
            HeaderValue.string("5"), HeaderValue.of(HeaderKind.BOOL, True),
            HeaderValue.string("bool:true"), HeaderValue(HeaderKind.STRING, b"\xff"),
            HeaderValue.string("string:/w=="), HeaderValue.string("string:string:/w=="),
            HeaderValue.string("kind_99:eA=="),
            HeaderValue.of(HeaderKind.RAW, b"k"), HeaderValue.string("raw:aw==")]
    texts = [key_text(k) for k in keys]
    assert len(set(texts)) == len(keys), texts
    assert key_text(HeaderValue.string("plain")) == "plain"
    assert key_text(HeaderValue.string("a:b")) == "a:b"  # not a kind's name: as itself
