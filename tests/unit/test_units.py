"""The shared parser of human sizes and durations."""

import pytest

from lurcher.core.wire import units
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.json_shapes import _id_map
from lurcher.core.wire.units import (
    U64_MAX, limit_bytes, limit_us, parse_duration, parse_duration_us, parse_size,
)


@pytest.mark.parametrize("text,expected", [
    (0, 0), (1024, 1024), ("1024", 1024), ("1 KB", 1000), ("1KiB", 1024), ("1.5 MB", 1_500_000),
    ("1.234567 MB", 1_234_567), ("2 GiB", 2 * 1024**3), ("10 G", 10**10), ("unlimited", U64_MAX),
])
def test_sizes(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "lots", "1 parsec", "1.2.3 MB", True])
def test_bad_sizes(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


@pytest.mark.parametrize("fraction", ["1.5", "1.5 B", "0.5", "1.0001 kB", "1.1 KiB"])
def test_a_size_that_is_not_a_whole_number_of_bytes_is_refused(fraction):
    """It used to be cut down ("1.5" read as 1 byte)."""
    with pytest.raises(ValueError, match="not a whole number of bytes"):
        parse_size(fraction)


@pytest.mark.parametrize("text,seconds", [
    ("5s", 5.0), ("1m 30s", 90.0), ("500ms", 0.5), ("2h30m", 9000.0), ("7", 7.0),
    ("1 day", 86400.0), ("250us", 0.00025),
])
def test_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


def test_months_and_years_are_humantime_s() -> None:
    """humantime (Iggy's duration grammar) reads "M" as a month and has months and years;
    here "1M" was a minute (a topic created with a message expiry of "1M" in Iggy's sense
    lost its messages after 60 s) and "1y", "3months" were refused."""
    assert parse_duration("1M") == parse_duration("1 month") == 2_630_016
    assert parse_duration("12M") == 31_560_192 and parse_duration("1m") == 60
    assert parse_duration("1y") == parse_duration("1year") == 31_557_600
    assert parse_duration("7years") == 7 * 31_557_600 and parse_duration("3months 2m") == (
        3 * 2_630_016 + 120)
    assert parse_duration("31millis") == pytest.approx(0.031)
    assert parse_duration("1H") == 3600  # any other unit in any case, as before


@pytest.mark.parametrize("bad", ["", "5 parsecs", "s5", "1m x"])
def test_bad_durations(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_microseconds_and_limits():
    assert parse_duration_us("1 m") == 60_000_000
    assert parse_duration_us(42) == 42
    assert parse_duration_us("never") == U64_MAX
    assert limit_us(None) == limit_us("default") == limit_bytes("server_default") == 0
    assert limit_bytes("unlimited") == U64_MAX and limit_us("1h") == 3_600_000_000


def test_decimal_is_ascii_digits_within_a_bound() -> None:
    """The one reading of a client's (or a file name's) number: ASCII digits only ('١' and
    '²' pass str.isdigit), leading zeros allowed, no int() of thousands of digits."""
    assert units.decimal("42", 2**32 - 1) == 42 and units.decimal("0" * 5000 + "7", 9) == 7
    assert units.decimal("4294967295", 2**32 - 1) == 2**32 - 1
    for text in ("4294967296", "9" * 5000, "١", "²", "", "-1", "+1", " 1", "1_0"):
        assert units.decimal(text, 2**32 - 1) is None, text


def test_json_id_maps_take_ascii_ids_within_u32() -> None:
    assert _id_map({"1": "a", "007": "b"}, "streams") == {1: "a", 7: "b"}
    for keys in ({"١": 1}, {"9" * 5000: 1}, {"4294967296": 1}):
        with pytest.raises(IggyError):
            _id_map(keys, "streams")
