"""The wire ``Identifier``: its encoding (kept per value), its decoding and the errors of
each, the same on every call, and the SDK's ``ident`` conversion."""

from __future__ import annotations

import pytest

from lurcher.core.wire.buffer import Reader
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import WireError
from lurcher.core.wire.identifier import Identifier
from lurcher.sdk.api.base import ident


@pytest.mark.parametrize("value, wire", [
    (7, b"\x01\x04\x07\x00\x00\x00"),
    (0xFFFFFFFF, b"\x01\x04\xff\xff\xff\xff"),
    ("abc", b"\x02\x03abc"),
    ("7", b"\x02\x017"),          # a str stays a name here; only ``parse`` makes it numeric
    ("é", b"\x02\x02\xc3\xa9"),
])
def test_encoding_is_the_same_on_every_call(value, wire) -> None:
    for _ in range(3):
        assert Identifier(value).encode() == wire
        assert Identifier.read(Reader(memoryview(wire))) == Identifier(value)


def test_an_int_and_a_name_of_its_digits_are_not_confused() -> None:
    assert Identifier(1).encode() != Identifier("1").encode()
    assert Identifier(True).encode() == b"\x01\x04\x01\x00\x00\x00"


def test_encoding_errors_are_raised_on_every_call() -> None:
    for _ in range(2):
        with pytest.raises(ValueError):
            Identifier("x" * 256).encode()


@pytest.mark.parametrize("wire, needed_or_code", [
    (b"\x01", 1), (b"\x01\x04\x00", 3), (b"\x02\x03ab", 1),
    (b"\x01\x03\x00\x00\x00", None), (b"\x02\x00", None),
    (b"\x03\x01x", ErrorCode.INVALID_COMMAND),
])
def test_decoding_refuses_short_and_malformed_identifiers(wire, needed_or_code) -> None:
    with pytest.raises(WireError) as err:
        Identifier.read(Reader(wire))
    if isinstance(needed_or_code, ErrorCode):
        assert err.value.code == needed_or_code
    elif needed_or_code is not None:
        assert err.value.needed == needed_or_code


def test_ident_parses_and_keeps() -> None:
    assert ident("42") == Identifier(42) and ident("s") == Identifier("s")
    assert ident(42) is ident(42)
    given = Identifier("t")
    assert ident(given) == given
    assert ident(["x"]) == Identifier(["x"])  # unhashable: parsed as before, not kept


def test_all_digit_strings_are_numbers_only_within_u32() -> None:
    """Leading zeros do not count; a longer run of digits is a name (``int`` of one over
    4,300 digits raises, which made a 500 of a long HTTP path)."""
    assert Identifier.parse("00000000042") == Identifier(42)
    assert Identifier.parse("0" * 5000 + "7") == Identifier(7)
    assert Identifier.parse("4294967295") == Identifier(0xFFFFFFFF)
    for name in ("4294967296", "9" * 5000, "", "4a"):
        assert Identifier.parse(name) == Identifier(name)
