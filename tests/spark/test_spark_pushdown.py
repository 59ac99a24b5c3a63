"""Filters never return wrong rows: the reproduction of the pushdown leak (a filtered query
made later queries on the same DataFrame read too few rows), the refusal of filter
pushdown on a PySpark that would leak it, and a property test: random sequences of
queries on ONE DataFrame (filters on partition, offset, timestamp: comparisons, ranges,
conjunctions, disjunctions, negations, ``isin``, nulls; unfiltered counts, ``collect``,
``limit``, unions and self-joins) each equal the same query with ``filterPushdown=false``
and a Python model of the stored messages. Real local Spark, real lurcher server; the
Spark setting for Python filter pushdown is on, as a user enabling it would have it."""

from __future__ import annotations

import datetime as dt
import operator
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lurcher.sdk.sync import SyncClient
from lurcher.spark import FILTER_PUSHDOWN_CONF
from lurcher.spark.reader import plan_scoped_pushdown
from tests.spark.conftest import connection
from tests.spark.spark_session import collect
from tests.support.server import LurcherServer

pytestmark = pytest.mark.slow

STREAM = "spark-pushdown"
PARTITIONS = 2
PER_PARTITION = 200
SEND_BATCH = 40
SEQUENCES = 200


def load(spark, server: LurcherServer, topic: str, **options: str):
    reader = (spark.read.format("lurcher").option("connection", connection(server))
              .option("stream", STREAM).option("topic", topic))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


@pytest.fixture(scope="module")
def client(module_server: LurcherServer):
    with SyncClient.from_connection_string(connection(module_server)) as sdk:
        sdk.create_stream(STREAM)
        yield sdk


# Spark's Python filter pushdown on, as a user enabling it has it; the rest makes the many
# tiny queries of the property test cheaper (one shuffle partition, a limit reads every
# split in its second round, no adaptive re-planning).
QUERY_CONF = {FILTER_PUSHDOWN_CONF: "true", "spark.sql.shuffle.partitions": "1",
              "spark.sql.limit.scaleUpFactor": "64", "spark.sql.adaptive.enabled": "false"}


@pytest.fixture()
def spark_pushdown(spark):
    """The session with ``QUERY_CONF`` (restored afterwards)."""
    before = {key: spark.conf.get(key, None) for key in QUERY_CONF}
    for key, value in QUERY_CONF.items():
        spark.conf.set(key, value)
    try:
        yield spark
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def test_filtered_query_does_not_shrink_later_queries(spark_pushdown, module_server, client):
    from pyspark.sql import functions as F

    client.create_topic(STREAM, "repro", partitions_count=2)
    for p in range(2):
        client.send_messages(STREAM, "repro", [b"m%d" % i for i in range(1000)], p)
    df = load(spark_pushdown, module_server, "repro")
    assert df.count() == 2000
    assert df.filter(F.col("offset") < 100).count() == 200
    assert df.count() == 2000
    assert df.filter(F.col("partition") == 1).count() == 1000
    assert df.count() == 2000
    low, high = df.filter(F.col("offset") < 10), df.filter(F.col("offset") >= 900)
    assert low.union(high).count() == 20 + 200
    assert df.join(df.filter(F.col("offset") < 5), ["partition", "offset"]).count() == 10


@pytest.mark.skipif(plan_scoped_pushdown(), reason="this PySpark keeps pushdown per scan")
def test_filter_pushdown_refused_where_spark_would_leak_it(spark_pushdown, module_server,
                                                            client):
    client.create_topic(STREAM, "refused", partitions_count=1)
    with pytest.raises(Exception, match="filterPushdown.*wrong rows"):
        load(spark_pushdown, module_server, "refused", filterPushdown="true").count()


# -- the property test ------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    partition: int
    offset: int
    timestamp: int  # µs


@dataclass(frozen=True)
class Pred:
    """A filter as a Spark Column builder and its SQL (three-valued) meaning on a Row."""

    text: str
    column: Callable[[], object]
    value: Callable[[Row], bool | None]

    def __repr__(self) -> str:
        return self.text


COMPARISONS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
               "==": operator.eq, "!=": operator.ne}


def _spark_literal(name: str, value: int):
    from pyspark.sql import functions as F

    if name == "timestamp":
        return F.lit(dt.datetime.fromtimestamp(value / 1e6, dt.timezone.utc))
    return F.lit(value)


def compare(name: str, op: str, value: int | None) -> Pred:
    from pyspark.sql import functions as F

    fn = COMPARISONS[op]
    if value is None:
        return Pred(f"{name} {op} NULL",
                    lambda: fn(F.col(name), F.lit(None).cast(
                        "timestamp" if name == "timestamp" else "long")),
                    lambda row: None)
    return Pred(f"{name} {op} {value}", lambda: fn(F.col(name), _spark_literal(name, value)),
                lambda row: fn(getattr(row, name), value))


def is_in(name: str, values: tuple[int, ...]) -> Pred:
    from pyspark.sql import functions as F

    if name == "timestamp":
        lits = [_spark_literal(name, v) for v in values]
        return Pred(f"{name} IN {values}", lambda: F.col(name).isin(*lits),
                    lambda row: row.timestamp in values)
    return Pred(f"{name} IN {values}", lambda: F.col(name).isin(*values),
                lambda row: getattr(row, name) in values)


def null_check(name: str, negate: bool) -> Pred:
    from pyspark.sql import functions as F

    if negate:
        return Pred(f"{name} IS NOT NULL", lambda: F.col(name).isNotNull(), lambda row: True)
    return Pred(f"{name} IS NULL", lambda: F.col(name).isNull(), lambda row: False)


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def conj(p: Pred, q: Pred) -> Pred:
    return Pred(f"({p} AND {q})", lambda: p.column() & q.column(),
                lambda row: _and(p.value(row), q.value(row)))


def disj(p: Pred, q: Pred) -> Pred:
    return Pred(f"({p} OR {q})", lambda: p.column() | q.column(),
                lambda row: _or(p.value(row), q.value(row)))


def neg(p: Pred) -> Pred:
    return Pred(f"NOT {p}", lambda: ~p.column(),
                lambda row: None if p.value(row) is None else not p.value(row))


def predicates(rows: list[Row]) -> st.SearchStrategy[Pred]:
    stamps = sorted({r.timestamp for r in rows})
    values = {
        "partition": st.integers(-1, PARTITIONS),
        "offset": st.integers(-1, PER_PARTITION + 1),
        "timestamp": st.sampled_from(stamps).flatmap(
            lambda t: st.sampled_from([t - 1, t, t + 1])),
    }
    leaf = st.one_of(
        st.sampled_from(list(values)).flatmap(lambda name: st.builds(
            compare, st.just(name), st.sampled_from(list(COMPARISONS)),
            st.one_of(values[name], values[name], values[name], st.none()))),
        st.sampled_from(list(values)).flatmap(lambda name: st.builds(
            is_in, st.just(name), st.lists(values[name], min_size=1, max_size=3).map(tuple))),
        st.builds(null_check, st.sampled_from(list(values)), st.booleans()),
    )
    return st.recursive(leaf, lambda inner: st.one_of(
        st.builds(conj, inner, inner), st.builds(disj, inner, inner), st.builds(neg, inner)),
        max_leaves=4)


@dataclass(frozen=True)
class Query:
    kind: str  # count, collect, limit, union, join
    p: Pred | None
    q: Pred | None = None
    n: int = 0
    expected_rows: tuple = ()  # limit: the rows it may return

    def result(self, df):
        """A DataFrame of this query's result rows on ``df``."""
        def where(pred: Pred | None):
            return df if pred is None else df.where(pred.column())
        keys = ["partition", "offset"]
        if self.kind == "count":
            return where(self.p).groupBy().count()
        if self.kind == "collect":
            return where(self.p).select(*keys)
        if self.kind == "limit":
            return where(self.p).select(*keys).limit(self.n)
        if self.kind == "union":
            return where(self.p).select(*keys).union(where(self.q).select(*keys)) \
                .groupBy().count()
        return where(self.p).join(where(self.q), keys).groupBy().count()

    def answer(self, rows: list) -> object:
        """The comparable answer from the result rows (see ``model``)."""
        if self.kind == "collect":
            return sorted((r.partition, r.offset) for r in rows)
        if self.kind == "limit":
            found = [(r.partition, r.offset) for r in rows]
            return len(found), len(set(found)), set(found) <= set(self.expected_rows)
        return rows[0]["count"] if rows else None

    def model(self, rows: list[Row]) -> object:
        def keep(pred: Pred | None) -> list[tuple[int, int]]:
            return [(r.partition, r.offset) for r in rows
                    if pred is None or pred.value(r) is True]
        if self.kind == "count":
            return len(keep(self.p))
        if self.kind == "collect":
            return sorted(keep(self.p))
        if self.kind == "limit":
            n = min(self.n, len(keep(self.p)))
            return n, n, True
        if self.kind == "union":
            return len(keep(self.p)) + len(keep(self.q))
        return len(set(keep(self.p)) & set(keep(self.q)))


def queries(rows: list[Row]) -> st.SearchStrategy[Query]:
    preds = predicates(rows)
    return st.one_of(
        st.builds(Query, st.just("count"), st.none()),
        st.builds(Query, st.just("count"), preds),
        st.builds(Query, st.just("collect"), preds),
        st.builds(Query, st.just("limit"), st.one_of(st.none(), preds),
                  n=st.integers(0, 50)),
        st.builds(Query, st.sampled_from(["union", "join"]), st.one_of(st.none(), preds),
                  st.one_of(st.none(), preds)),
    )


@pytest.fixture(scope="module")
def stored(module_server: LurcherServer, client) -> list[Row]:
    """Topic ``model``: PER_PARTITION messages per partition sent in batches of SEND_BATCH
    (so timestamps repeat within a batch and differ between batches), read back."""
    import time

    client.create_topic(STREAM, "model", partitions_count=PARTITIONS)
    for begin in range(0, PER_PARTITION, SEND_BATCH):
        for p in range(PARTITIONS):
            client.send_messages(STREAM, "model", [b"%d" % i for i in range(SEND_BATCH)], p)
        time.sleep(0.002)
    rows = []
    for p in range(PARTITIONS):
        polled = client.poll_messages(STREAM, "model", p, "first", PER_PARTITION + 10)
        rows += [Row(p, m.offset, m.timestamp) for m in polled.messages()]
    assert len(rows) == PARTITIONS * PER_PARTITION
    return rows


def _limit_rows(query: Query, rows: list[Row]) -> Query:
    """The limit query with the rows it may return (any ``n`` of the matching ones)."""
    if query.kind != "limit":
        return query
    matching = tuple((r.partition, r.offset) for r in rows
                     if query.p is None or query.p.value(r) is True)
    return Query(query.kind, query.p, query.q, query.n, matching)


@pytest.mark.timeout(3600)  # 200 sequences of Spark jobs
def test_random_query_sequences_match_the_model(spark_pushdown, module_server, stored):
    """Each sequence loads two DataFrames (default options, and ``filterPushdown=false``)
    and runs every step on both: the leak this guards against is state one query leaves
    for the next query on the same DataFrame. Each sequence picks whether Spark's Python
    filter pushdown is on (the path that leaked) or off (Spark's default). Each step is one
    Spark job computing the query on both DataFrames, its rows tagged by ``side``."""
    from pyspark.sql import functions as F

    spark = spark_pushdown

    @settings(max_examples=SEQUENCES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.booleans(), st.lists(queries(stored), min_size=2, max_size=3))
    def sequence(spark_pushdown_on: bool, steps: list[Query]) -> None:
        spark.conf.set(FILTER_PUSHDOWN_CONF, str(spark_pushdown_on).lower())
        default = load(spark, module_server, "model")
        unpushed = load(spark, module_server, "model", filterPushdown="false")
        for step in map(lambda s: _limit_rows(s, stored), steps):
            both = collect(step.result(default).withColumn("side", F.lit(0)).unionByName(
                step.result(unpushed).withColumn("side", F.lit(1))))
            expected = step.model(stored)
            for side, name in ((0, "default"), (1, "filterPushdown=false")):
                found = step.answer([r for r in both if r["side"] == side])
                assert found == expected, (name, spark_pushdown_on, step)

    sequence()
