"""The streaming reader's offsets against a real lurcher server, without a Spark session:
``LurcherStreamReader.latestOffset`` / ``partitions`` / ``read`` called as Spark's
micro-batch loop calls them, with checkpointed offsets passed back in."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pyarrow as pa
import pytest

from lurcher.sdk.sync import SyncClient
from lurcher.spark.offsets import offset_positions, went_back
from lurcher.spark.options import LurcherSparkError, source_options
from lurcher.spark.reader import LurcherStreamReader
from tests.spark.conftest import connection


@pytest.fixture()
def admin(module_server) -> Iterator[SyncClient]:
    with SyncClient.from_connection_string(connection(module_server)) as client:
        yield client


def _reader(server, topic: str, **extra: str) -> LurcherStreamReader:
    return LurcherStreamReader(source_options(
        {"connection": connection(server), "stream": "offsets", "topic": topic, **extra}))


def _new_topic(admin: SyncClient, topic: str) -> None:
    if admin.get_stream("offsets") is None:
        admin.create_stream("offsets")
    admin.create_topic("offsets", topic, partitions_count=1)


def _send(admin: SyncClient, topic: str, payloads: list[bytes]) -> None:
    admin.send_messages("offsets", topic, payloads, 0)


def _rows(reader: LurcherStreamReader, start: dict, end: dict) -> list[tuple[int, bytes]]:
    batches = [b for split in reader.partitions(start, end) for b in reader.read(split)]
    table = pa.Table.from_batches(batches) if batches else None
    if table is None:
        return []
    return list(zip(table.column("offset").to_pylist(), table.column("payload").to_pylist()))


def test_went_back_ignores_the_ambiguous_empty_end():
    assert went_back({"0": 5, "1": 3}, {"0": 3, "1": 3}) == ["0"]
    assert went_back({"0": 1}, {"0": 0}) == []  # never written, or offset 0 deleted
    assert went_back({"0": 2}, {"0": 0}) == ["0"]


def test_purged_topic_fails_the_query_instead_of_skipping_new_messages(module_server, admin):
    _new_topic(admin, "purged")
    _send(admin, "purged", [b"old-%d" % i for i in range(5)])
    reader = _reader(module_server, "purged")
    checkpoint = reader.latestOffset({"0": 0}, None)
    assert offset_positions(checkpoint) == {"0": 5}
    admin.purge_topic("offsets", "purged")
    _send(admin, "purged", [b"new-%d" % i for i in range(3)])  # offsets 0..2 again
    with pytest.raises(LurcherSparkError, match="partition 0 from 5 to 3"):
        reader.latestOffset(checkpoint, None)


def test_purged_topic_without_fail_on_data_loss_reads_on_from_the_new_end(module_server,
                                                                          admin):
    _new_topic(admin, "purged-lenient")
    _send(admin, "purged-lenient", [b"old-%d" % i for i in range(5)])
    reader = _reader(module_server, "purged-lenient", failOnDataLoss="false")
    checkpoint = reader.latestOffset({"0": 0}, None)
    admin.purge_topic("offsets", "purged-lenient")
    _send(admin, "purged-lenient", [b"new-0", b"new-1"])
    rebased = reader.latestOffset(checkpoint, None)
    assert rebased == {"0": 2} and _rows(reader, checkpoint, rebased) == []
    _send(admin, "purged-lenient", [b"new-%d" % i for i in range(2, 8)])
    end = reader.latestOffset(rebased, None)
    assert end == {"0": 8}
    assert _rows(reader, rebased, end) == [(i, b"new-%d" % i) for i in range(2, 8)]


def _restarted(server, topic: str, checkpoint: dict) -> tuple[LurcherStreamReader, dict]:
    """A new reader (the query started again) and ``checkpoint`` as Spark gives it back:
    through JSON."""
    return _reader(server, topic), json.loads(json.dumps(checkpoint))


def test_a_purge_refilled_while_the_query_was_stopped_fails_it(module_server, admin):
    """Offsets 0..99 read and checkpointed, the query stopped; the topic purged and
    refilled with 150 other messages; the query started again read 100..149 and skipped
    the new 0..99 silently (the check needed the stopped run's memory)."""
    _new_topic(admin, "purged-stopped")
    _send(admin, "purged-stopped", [b"old-%d" % i for i in range(100)])
    first = _reader(module_server, "purged-stopped")
    checkpoint = first.latestOffset({"0": 0}, None)
    assert len(_rows(first, {"0": 0}, checkpoint)) == 100
    admin.purge_topic("offsets", "purged-stopped")
    _send(admin, "purged-stopped", [b"new-%d" % i for i in range(150)])
    again, start = _restarted(module_server, "purged-stopped", checkpoint)
    end = again.latestOffset(start, None)
    assert offset_positions(end) == {"0": 150}
    with pytest.raises(LurcherSparkError,
                       match="offset 99 is not the one there when the checkpointed offset 100"):
        again.partitions(start, end)


def test_a_restarted_query_goes_on_from_its_checkpoint(module_server, admin):
    """No purge: the restarted query reads on from the checkpoint, with or without the
    checksums (a checkpoint written before offsets carried them)."""
    _new_topic(admin, "restarted")
    _send(admin, "restarted", [b"m-%d" % i for i in range(10)])
    first = _reader(module_server, "restarted")
    checkpoint = first.latestOffset({"0": 0}, None)
    assert set(checkpoint) == {"0", "checksums"}
    assert len(_rows(first, {"0": 0}, checkpoint)) == 10
    _send(admin, "restarted", [b"m-%d" % i for i in range(10, 15)])
    for start in (checkpoint, offset_positions(checkpoint)):
        again, start = _restarted(module_server, "restarted", start)
        end = again.latestOffset(start, None)
        assert _rows(again, start, end) == [(i, b"m-%d" % i) for i in range(10, 15)]
