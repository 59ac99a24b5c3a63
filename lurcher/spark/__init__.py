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
``failOnDataLoss`` (default true); ``filterPushdown`` (default true: filters on
partition, offset and timestamp are pushed down; needs the Spark setting
``spark.sql.python.filterPushdown.enabled``, which ``register`` turns on).

Write options: ``stream``, ``topic``, ``sendMessages`` (messages per batch, default 1,000);
columns are described in ``lurcher.spark.writer``. Row schema: ``lurcher.spark.arrow``.
Failures are ``LurcherSparkError`` naming the Iggy error where there is one.
"""

from __future__ import annotations

from typing import Any

from lurcher.spark.options import LurcherSparkError
from lurcher.spark.source import FORMAT, LurcherDataSource

FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any, filter_pushdown: bool = True) -> None:
    """Register format ``lurcher`` with ``spark`` (a SparkSession); with ``filter_pushdown``
    also enable Spark's filter pushdown into Python data sources for this session."""
    spark.dataSource.register(LurcherDataSource)
    if filter_pushdown:
        spark.conf.set(FILTER_PUSHDOWN_CONF, "true")


__all__ = ["FORMAT", "LurcherDataSource", "LurcherSparkError", "register"]
