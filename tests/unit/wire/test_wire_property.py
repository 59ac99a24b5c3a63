"""Property: any bytes either decode or raise WireError, for every request and response
type, the sub-values, list forms, the user-headers block, poll iteration and frames.
Inputs are random bytes and mutations (byte flips, cuts, insertions) of valid samples."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wire_samples import LISTS, REQUESTS, VALUES

from lurcher.core.wire.codec import WireStruct
from lurcher.core.wire.commands import COMMANDS, decode_request, decode_response
from lurcher.core.wire.errors import WireError
from lurcher.core.connection.framing import FrameLimits, FrameReader
from lurcher.core.wire.frames import split_response
from lurcher.core.wire.headers import decode_headers
from lurcher.core.wire.responses.messages import iter_messages

SEEDS: dict[type, list[bytes]] = {}
for _value in REQUESTS + VALUES:
    SEEDS.setdefault(type(_value), []).append(_value.encode())
for _item_type, _items in LISTS.items():
    SEEDS.setdefault(_item_type, []).append(WireStruct.encode_list(_items))

TYPES = sorted(SEEDS, key=lambda t: t.__name__)


@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    buf = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "cut", "insert"]))
        pos = draw(st.integers(0, len(buf)))
        if op == "cut":
            del buf[pos:]
        elif op == "insert":
            buf[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif buf and pos < len(buf):
            buf[pos] = draw(st.integers(0, 255)) if op == "set" else buf[pos] ^ (1 << draw(
                st.integers(0, 7)))
    return bytes(buf)


def inputs(seeds: list[bytes]) -> st.SearchStrategy[bytes]:
    return st.one_of(st.binary(max_size=300), mutated(seeds))


def decodes_or_wire_error(fn: Callable[[bytes], object], data: bytes) -> None:
    try:
        fn(data)
    except WireError:
        pass


PROPERTY = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("codec_type", TYPES, ids=lambda t: t.__name__)
@PROPERTY
@given(data=st.data())
def test_any_bytes_decode_or_raise_wire_error(codec_type: type[WireStruct],
                                              data: st.DataObject) -> None:
    buf = data.draw(inputs(SEEDS[codec_type]))
    decodes_or_wire_error(codec_type.decode, buf)
    if codec_type in LISTS:
        decodes_or_wire_error(codec_type.decode_list, buf)


ALL_SEEDS = [seed for seeds in SEEDS.values() for seed in seeds]


@PROPERTY
@given(code=st.sampled_from(sorted(COMMANDS) + [0, 2, 13, 99, 606]), data=st.data())
def test_command_dispatch_decodes_or_raises(code: int, data: st.DataObject) -> None:
    buf = data.draw(inputs(ALL_SEEDS))
    decodes_or_wire_error(lambda b: decode_request(code, b), buf)
    decodes_or_wire_error(lambda b: decode_response(code, b), buf)


HEADER_SEED = [bytes.fromhex("02010000006b0c080000000500000000000000")]


@PROPERTY
@given(data=st.data())
def test_headers_messages_and_frames(data: st.DataObject) -> None:
    buf = data.draw(inputs(HEADER_SEED + ALL_SEEDS))
    decodes_or_wire_error(decode_headers, buf)
    decodes_or_wire_error(lambda b: list(iter_messages(b)), buf)
    reader = FrameReader(FrameLimits(10 * 2**20, 2**30, 2**30))
    reader.feed(buf)
    while reader.next_frame() is not None:  # frames or refusals, never an exception
        pass
    decodes_or_wire_error(split_response, buf)
