"""Exactly-once streaming into lurcher: the pipeline of ``pipeline_driver.py`` (topic A ->
transform -> topic B through the lurcher sink, on local[2]) is SIGKILLed at random points
five times and restarted from its checkpoint while A keeps growing; B must end with every
transformed message exactly once, in order per partition, and the consumer offsets the
query committed (``commitConsumer``) must be those of its checkpoint (Spark commits a
batch's progress when it plans the next one, so they trail by one micro-batch)."""

from __future__ import annotations

import pytest

from tests.spark.conftest import spark_env
from tests.spark.pipeline import describe, run_with_kills

pytestmark = pytest.mark.slow

KILLS = 5


@pytest.mark.timeout(3600)  # six driver starts
def test_killed_driver_restarts_without_losing_or_duplicating(dedup_server, tmp_path):
    outcome = run_with_kills("local[2]", dedup_server, "exactly-once", tmp_path, spark_env(),
                             KILLS, seed=16)
    assert outcome.kills == KILLS
    assert outcome.sink == outcome.expected, describe(outcome)
    assert outcome.replays >= 1, describe(outcome)  # some kill left a batch to replay
    assert outcome.committed == outcome.expected_committed, describe(outcome)
    assert all(outcome.committed.values()), describe(outcome)
