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
partition); a JSON map naming a partition the topic lacks is refused, and so are the two
ending options on a streaming read; ``maxMessagesPerPartition`` (largest Spark split,
default 1,000,000);
``maxMessagesPerTrigger`` (streaming); ``pollMessages`` (messages per poll, default 5,000);
``failOnDataLoss`` (default true: messages deleted by retention inside a range, a
streaming partition whose offsets restarted after a purge or that is gone (partitions
deleted), or planned offsets that hold other messages after a purge and refill, fail the
read instead of being skipped or mixed in); ``filterPushdown`` (default false: Spark evaluates
every filter). Filter pushdown (filters on partition, offset and timestamp narrow the
read) is refused on PySpark 4.1-4.3, where Spark reuses one scan's pushed-down reader for
other scans of the same DataFrame and so would return wrong rows (see
``lurcher.spark.reader``); where Spark keeps it per scan, ``filterPushdown=true`` together
with ``register(spark, filter_pushdown=True)`` (the Spark setting
``spark.sql.python.filterPushdown.enabled``) turns it on. To read less on any version, use
the per-DataFrame options ``partitions``, ``startingOffsets``/``endingOffsets`` and
``startingTimestamp``/``endingTimestamp``.

Streaming read options: ``commitConsumer`` (a consumer name or id) or
``commitConsumerGroup`` (a group name, created when missing; all digits
name the group of that id when there is one): after each micro-batch the
last offset read per partition is stored as that consumer's offsets, so ``lurcher
consumer-offset get <consumer> <stream> <topic> <partition>`` (``-k consumer-group`` for
a group) and the MCP tools show how far the job has read. They trail by one micro-batch
(Spark commits a batch's progress to the source when it plans the next batch). Display
only: Spark's checkpoint stays the source of truth and a restart never reads them.

Write options: ``stream``, ``topic``, ``sendMessages`` (messages per batch, default 1,000;
a batch also stays within 16 MiB unless one message is larger);
``exactlyOnce`` (writeStream only, default true). Columns are described in
``lurcher.spark.writer``. Row schema: ``lurcher.spark.arrow``. Failures are
``LurcherSparkError`` naming the Iggy error where there is one.

Delivery: ``writeStream`` is exactly-once when the server deduplicates message ids:
start it with ``system.message_deduplication.enabled = true``
(``LURCHER_SYSTEM_MESSAGE_DEDUPLICATION_ENABLED=true``), an ``expiry`` longer than the
longest time between a micro-batch's first attempt and its replay (driver restart time
plus trigger interval plus batch duration; the default "1 m" is too short for most
restarts) and ``max_entries`` at least the messages one partition receives in that time
(0 = unlimited). Rows without an ``id`` get ids derived from (query id, batch id, Spark
partition, row position) and rows without ``partition``/``key`` a partition derived from
those, so a replayed micro-batch resends identical messages that the server drops. This
needs a deterministic plan (per Spark partition the same rows in the same order on a
replay: a lurcher or other replayable source and row-wise transforms; sort within
partitions after a shuffle). Without deduplication on the server it is at-least-once, and
so it is across a server restart (the window is in memory, as in Iggy) and for rows placed
by lurcher when partitions are added or deleted between a batch and its replay.
``df.write`` (batch) is at-least-once: a retried task resends its rows; give rows an
``id`` (and a server with deduplication) to drop the resent ones.
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
