"""Round-trip and truncation tests over every sample value of every wire codec type."""

from __future__ import annotations

import pytest
from wire_samples import LISTS, REQUESTS, TAIL_TYPES, VALUES, same, tail_start

from lurcher.core.wire.codec import REQUEST_TYPES, WireStruct
from lurcher.core.wire.commands import COMMANDS
from lurcher.core.wire.errors import WireError

SAMPLES = REQUESTS + VALUES


def _id(value: object) -> str:
    return type(value).__name__


def test_every_command_has_request_samples() -> None:
    covered = {type(v) for v in REQUESTS}
    assert {REQUEST_TYPES[code] for code in COMMANDS} <= covered


def test_every_response_type_has_samples() -> None:
    covered = {type(v) for v in VALUES} | set(LISTS)
    responses = {spec.response for spec in COMMANDS.values() if spec.response is not None}
    assert responses <= covered
    assert {spec.response for spec in COMMANDS.values() if spec.response_is_list} == set(LISTS)


@pytest.mark.parametrize("value", SAMPLES, ids=_id)
def test_round_trip(value: WireStruct) -> None:
    encoded = value.encode()
    decoded, consumed = type(value).decode(encoded)
    assert same(decoded, value)
    assert consumed == len(encoded)
    assert decoded.encode() == encoded


# In the tail forms (SendMessages, PolledMessages, SnapshotFile) trailing bytes belong to
# the value, so they are not part of this test.
@pytest.mark.parametrize("value", [v for v in SAMPLES if not isinstance(v, TAIL_TYPES)], ids=_id)
def test_trailing_bytes_are_ignored(value: WireStruct) -> None:
    encoded = value.encode()
    decoded, consumed = type(value).decode(encoded + b"\x07\x00")
    assert same(decoded, value) and consumed == len(encoded)


@pytest.mark.parametrize("value", SAMPLES, ids=_id)
def test_every_strict_prefix_raises_wire_error(value: WireStruct) -> None:
    encoded = value.encode()
    for cut in range(tail_start(value, encoded)):
        with pytest.raises(WireError):
            type(value).decode(encoded[:cut])


@pytest.mark.parametrize("item_type", list(LISTS), ids=lambda t: t.__name__)
def test_lists_round_trip_and_truncate(item_type: type[WireStruct]) -> None:
    items = LISTS[item_type]
    encoded = WireStruct.encode_list(items)
    assert item_type.decode_list(encoded) == items
    assert item_type.decode_list(b"") == []
    boundaries, end = {0}, 0
    for item in items:
        end += len(item.encode())
        boundaries.add(end)
    for cut in range(len(encoded)):
        if cut in boundaries:
            assert item_type.decode_list(encoded[:cut]) == items[:sorted(boundaries).index(cut)]
        else:
            with pytest.raises(WireError):
                item_type.decode_list(encoded[:cut])
