"""lurcher.spark: a PySpark 4 data source, format ``lurcher``, built on PySpark's Python
Data Source API and on the lurcher SDK (a client, never server internals). Tested with
PySpark 4.3; filter pushdown needs 4.1, ``maxMessagesPerTrigger`` 4.2, writeStream 4.1.

    import lurcher.spark
    lurcher.spark.register(spark)
    df = (spark.read.format("lurcher")
          .option("connection", "iggy://iggy:iggy@127.0.0.1:8090")
          .option("stream", "orders").option("topic", "created").load())

Connection options: ``connection`` (an ``iggy://`` / ``iggy+<transport>://`` string), or
``address``, ``transport`` (tcp, quic, http, ws), ``username``/``password``, ``token``
(alias ``pat``, a personal access token), ``tls``, ``tls_domain``, ``tls_ca_file``,
``tls_validate_certificate``; separate options override the string.

Read options: ``stream``, ``topic`` (required); ``partitions`` ("0,2"; default all);
``startingOffsets`` / ``endingOffsets`` ("earliest", "latest" or JSON per partition,
ending exclusive; defaults earliest/latest for batch, latest for streaming);
``startingTimestamp`` / ``endingTimestamp`` (µs since epoch or ISO-8601, or JSON per
partition); ``maxMessagesPerPartition`` (largest Spark split, default 1,000,000);
``maxMessagesPerTrigger`` (streaming); ``pollMessages`` (messages per poll, default 5,000);
``failOnDataLoss`` (default true); ``filterPushdown`` (default false: Spark evaluates
every filter). Filter pushdown (filters on partition, offset and timestamp narrow the
read) is refused on PySpark 4.1-4.3, where Spark reuses one scan's pushed-down reader for
other scans of the same DataFrame and so would return wrong rows (see
``lurcher.spark.reader``); where Spark keeps it per scan, ``filterPushdown=true`` together
with ``register(spark, filter_pushdown=True)`` (the Spark setting
``spark.sql.python.filterPushdown.enabled``) turns it on. To read less on any version, use
the per-DataFrame options ``partitions``, ``startingOffsets``/``endingOffsets`` and
``startingTimestamp``/``endingTimestamp``.

Write options: ``stream``, ``topic``, ``sendMessages`` (messages per batch, default 1,000);
columns are described in ``lurcher.spark.writer``. Row schema: ``lurcher.spark.arrow``.
Failures are ``LurcherSparkError`` naming the Iggy error where there is one.
"""

from __future__ import annotations

from typing import Any

from lurcher.spark.options import LurcherSparkError
from lurcher.spark.source import FORMAT, LurcherDataSource

FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any, filter_pushdown: bool = False) -> None:
    """Register format ``lurcher`` with ``spark`` (a SparkSession); with ``filter_pushdown``
    also enable Spark's filter pushdown into Python data sources for this session (needed
    by the ``filterPushdown`` option; harmless otherwise: lurcher then pushes nothing)."""
    spark.dataSource.register(LurcherDataSource)
    if filter_pushdown:
        spark.conf.set(FILTER_PUSHDOWN_CONF, "true")


__all__ = ["FORMAT", "LurcherDataSource", "LurcherSparkError", "register"]
