"""A streaming read's progress as consumer offsets (``commitConsumer`` /
``commitConsumerGroup``): ``LurcherStreamReader.commit`` against a real server, read back
by the SDK and shown by ``lurcher consumer-offset get``. (The streaming query committing
it is exercised by test_spark_exactly_once.py.)"""

from __future__ import annotations

import json
import subprocess
import sys

from lurcher.sdk.sync import SyncClient
from lurcher.spark.options import source_options
from lurcher.spark.reader import LurcherStreamReader
from tests.spark.conftest import connection, spark_env

STREAM = "spark-progress"


def reader(server, **options: str) -> LurcherStreamReader:
    return LurcherStreamReader(source_options(
        {"connection": connection(server), "stream": STREAM, "topic": "t", **options}))


def cli_offset(server, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "lurcher.sdk.cli", "--connection",
                           connection(server), "--json", "consumer-offset", "get", *args],
                          capture_output=True, text=True, env=spark_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_commit_stores_last_read_offsets(module_server):
    with SyncClient.from_connection_string(connection(module_server)) as client:
        client.create_stream(STREAM)
        client.create_topic(STREAM, "t", partitions_count=3)
        for p in range(2):
            client.send_messages(STREAM, "t", [b"m"] * 10, p)
        reader(module_server).commit({"0": 4, "1": 10, "2": 0})  # no option: stores nothing
        assert client.get_consumer_offset("job", STREAM, "t", 0) is None

        reader(module_server, commitConsumer="job").commit({"0": 4, "1": 10, "2": 0})
        stored = {p: client.get_consumer_offset("job", STREAM, "t", p) for p in range(3)}
        assert stored[0].stored_offset == 3 and stored[1].stored_offset == 9
        assert stored[2] is None  # nothing read from the empty partition

        reader(module_server, commitConsumerGroup="jobs").commit({"0": 7, "1": 2})
        client.join_consumer_group(STREAM, "t", "jobs")  # a member reads it as any client can
        group = client.get_consumer_offset("jobs", STREAM, "t", 0, group=True)
        assert group.stored_offset == 6

    shown = cli_offset(module_server, "job", STREAM, "t", "1")
    assert shown["stored_offset"] == 9
    shown = cli_offset(module_server, "jobs", STREAM, "t", "0", "-k", "consumer-group")
    assert shown["stored_offset"] == 6
