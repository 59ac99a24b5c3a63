"""The README's Spark block, run as written (addresses pointed at a real server) in the
tests' Spark session, reads the messages stored in orders/created."""

from __future__ import annotations

from lurcher.sdk.sync import SyncClient
from tests.spark.conftest import connection
from tests.spark.spark_session import collect
from tests.support.readme import code_blocks, localize, run_python

MESSAGES = 25


def test_readme_spark_block_reads_the_topic(spark, module_server):
    (block,) = [b for b in code_blocks() if "register(spark)" in b.text]
    with SyncClient.from_connection_string(connection(module_server)) as client:
        client.create_stream("orders")
        client.create_topic("orders", "created", partitions_count=3)
        client.send_messages("orders", "created", [b'{"id": %d}' % i for i in range(MESSAGES)])
    namespace = {"spark": spark}
    run_python(localize(block.text, module_server), namespace)
    rows = collect(namespace["df"])
    assert len(rows) == MESSAGES
    assert sorted(bytes(r.payload) for r in rows) == sorted(
        b'{"id": %d}' % i for i in range(MESSAGES))
