"""Filter pushdown: Spark's ``pyspark.sql.datasource`` filters on ``partition``, ``offset``
and ``timestamp`` turned into half-open intervals the reader plans and reads with.

Pushed: ``=``, ``>``, ``>=``, ``<``, ``<=`` on all three columns, and ``IN`` on
``partition``. Everything else (``NOT``, ``IN`` on offsets, other columns, literals of an
unexpected type) goes back to Spark. A pushed filter is applied exactly: the planner uses
the intervals to choose which partitions and offset ranges to poll (timestamps become
offsets through the server's timestamp index, which assumes append timestamps do not
decrease within a partition), and the reader keeps only rows inside every interval.

``RowBounds`` is immutable and picklable; ``push(bounds, filters)`` returns the new
bounds and the filters Spark must still evaluate (the same objects, as Spark requires).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence

import msgspec
import numpy as np

from lurcher.spark.offsets import datetime_micros

UNBOUNDED = 1 << 64


class Interval(msgspec.Struct, frozen=True):
    """``[lo, hi)`` over non-negative integers; empty when lo >= hi."""

    lo: int = 0
    hi: int = UNBOUNDED

    def meet(self, lo: int, hi: int) -> "Interval":
        return Interval(max(self.lo, lo), min(self.hi, hi))

    @property
    def bounded(self) -> bool:
        return self.lo > 0 or self.hi < UNBOUNDED

    def mask(self, values: np.ndarray) -> np.ndarray:
        lo = np.uint64(min(self.lo, UNBOUNDED - 1))
        keep = values >= lo
        if self.hi < UNBOUNDED:
            keep &= values < np.uint64(self.hi)
        return keep


class RowBounds(msgspec.Struct, frozen=True):
    partition: Interval = Interval()
    offset: Interval = Interval()
    timestamp: Interval = Interval()
    partitions_in: frozenset[int] | None = None

    def allows_partition(self, partition_id: int) -> bool:
        inside = self.partition.lo <= partition_id < self.partition.hi
        return inside and (self.partitions_in is None or partition_id in self.partitions_in)


# filter class name -> (lo, hi) of the rows it keeps, for an integer literal v
_COMPARISONS: dict[str, Callable[[int], tuple[int, int]]] = {
    "EqualTo": lambda v: (v, v + 1),
    "GreaterThan": lambda v: (v + 1, UNBOUNDED),
    "GreaterThanOrEqual": lambda v: (v, UNBOUNDED),
    "LessThan": lambda v: (0, v),
    "LessThanOrEqual": lambda v: (0, v + 1),
}
_COLUMNS = ("partition", "offset", "timestamp")


def _literal(column: str, value: object) -> int | None:
    """The literal as an integer on the column's scale, or None when it cannot be pushed."""
    if column == "timestamp":
        return max(datetime_micros(value), -1) if isinstance(value, dt.datetime) else None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _push_one(bounds: RowBounds, f: object) -> RowBounds | None:
    """``bounds`` narrowed by ``f``, or None when ``f`` is not pushable."""
    name = type(f).__name__
    attribute = getattr(f, "attribute", None)
    if attribute is None or len(attribute) != 1 or attribute[0] not in _COLUMNS:
        return None
    column = attribute[0]
    if name == "In" and column == "partition":
        values = [_literal(column, v) for v in f.value]  # type: ignore[attr-defined]
        if any(v is None for v in values):
            return None
        known = bounds.partitions_in
        chosen = frozenset(values) if known is None else known & frozenset(values)
        return msgspec.structs.replace(bounds, partitions_in=chosen)
    comparison = _COMPARISONS.get(name)
    value = _literal(column, getattr(f, "value", None))
    if comparison is None or value is None:
        return None
    lo, hi = comparison(value)
    narrowed = getattr(bounds, column).meet(max(lo, 0), max(hi, 0))
    return msgspec.structs.replace(bounds, **{column: narrowed})


def push(bounds: RowBounds, filters: Sequence[object]) -> tuple[RowBounds, list[object]]:
    """(narrowed bounds, the filters not pushed)."""
    rest = []
    for f in filters:
        narrowed = _push_one(bounds, f)
        if narrowed is None:
            rest.append(f)
        else:
            bounds = narrowed
    return bounds, rest
