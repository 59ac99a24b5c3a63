"""The Spark source's consumer (whose offsets record its progress) is an id only when it is
ASCII digits within u32, as Iggy reads identifiers: 'consumer "١"' was consumer 1, so its
progress was stored over consumer 1's (and read from it)."""

from __future__ import annotations

from lurcher.spark.client import _consumer_id


def test_only_ascii_digits_within_u32_are_ids() -> None:
    assert _consumer_id("7") == 7 and _consumer_id("007") == 7
    for name in ("١", "²", "4294967296", "9" * 5000, "spark-job"):
        assert _consumer_id(name) == name
