"""A Spark standalone cluster (master + worker started here on loopback with ephemeral
ports): the batch read, executors in their own JVMs, their Python workers importing
lurcher, read every partition straight from lurcher; and the exactly-once pipeline of
``pipeline_driver.py`` with its driver SIGKILLed and restarted (its executors then die
with it, possibly mid-write)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lurcher.sdk.sync import SyncClient
from tests.spark.conftest import connection, spark_env
from tests.spark.lurcher_data import produce
from tests.spark.pipeline import describe, run_with_kills
from tests.spark.standalone import StandaloneCluster
from tests.support.server import LurcherServer

pytestmark = [pytest.mark.slow, pytest.mark.system("java")]

STREAM = "spark-cluster"
TOPIC = "events"
PARTITIONS = 4
PER_PARTITION = 10_000
DRIVER_TIMEOUT_S = 300
CLUSTER_KILLS = 3


def test_batch_read_through_standalone_cluster(module_server: LurcherServer, tmp_path):
    with SyncClient.from_connection_string(connection(module_server)) as client:
        client.create_stream(STREAM)
        client.create_topic(STREAM, TOPIC, partitions_count=PARTITIONS)
        produce(client, STREAM, TOPIC, PARTITIONS, 0, PER_PARTITION, 2_500)

    env = spark_env()
    with StandaloneCluster(tmp_path / "cluster", env) as cluster:
        driver = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("cluster_driver.py")),
             cluster.master_url, connection(module_server), STREAM, TOPIC],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S)
    assert driver.returncode == 0, driver.stderr[-4000:]
    result = json.loads(driver.stdout.strip().splitlines()[-1])
    assert result["master"] == cluster.master_url
    assert result["counts"] == {str(p): [PER_PARTITION, 0, PER_PARTITION - 1]
                                for p in range(PARTITIONS)}
    assert result["splits"] == PARTITIONS
    assert result["block_managers"] >= 2  # the driver's and at least one executor's
    assert result["worker_python_pids"] and result["driver_pid"] not in result["worker_python_pids"]


@pytest.mark.timeout(3600)  # a cluster and four driver starts
def test_exactly_once_pipeline_through_standalone_cluster(dedup_server, tmp_path):
    env = spark_env()
    with StandaloneCluster(tmp_path / "cluster", env) as cluster:
        outcome = run_with_kills(cluster.master_url, dedup_server, "cluster-exactly-once",
                                 tmp_path, env, CLUSTER_KILLS, seed=17)
    assert outcome.sink == outcome.expected, describe(outcome)
    assert outcome.committed == outcome.expected_committed, describe(outcome)
    assert all(outcome.committed.values()), describe(outcome)
