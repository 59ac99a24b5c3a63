"""Driver program of the cluster test, run as its own process (one SparkContext per
process): reads a lurcher topic through a standalone master and prints one JSON line.

    python cluster_driver.py <master url> <connection> <stream> <topic>
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator


def _python_pids(rows) -> Iterator[int]:
    yield os.getpid()


def main(master: str, connection: str, stream: str, topic: str) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from spark_session import BASE_CONF, LOOPBACK, collect

    import lurcher.spark

    builder = SparkSession.builder.master(master).appName("lurcher-cluster-test")
    for key, value in BASE_CONF.items():
        builder = builder.config(key, value)
    spark = (builder.config("spark.driver.memory", "512m")
             .config("spark.executor.memory", "512m")
             .config("spark.executor.cores", "2")
             .config("spark.cores.max", "2")
             .config("spark.pyspark.python", sys.executable)
             .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
             .config("spark.executorEnv.SPARK_LOCAL_IP", LOOPBACK).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        lurcher.spark.register(spark)
        df = (spark.read.format("lurcher").option("connection", connection)
              .option("stream", stream).option("topic", topic).load())
        counts = {r["partition"]: [r["n"], r["lo"], r["hi"]] for r in collect(
            df.groupBy("partition").agg(F.count("*").alias("n"), F.min("offset").alias("lo"),
                                        F.max("offset").alias("hi")))}
        executors = [e.split(":")[0] for e in
                     spark.sparkContext._jsc.sc().getExecutorMemoryStatus().keySet()
                     .toString().strip("Set()").split(", ")]
        print(json.dumps({
            "master": spark.sparkContext.master,
            "counts": counts,
            "splits": df.rdd.getNumPartitions(),
            "block_managers": len(executors),
            "driver_pid": os.getpid(),
            "worker_python_pids": sorted(set(collect(df.rdd.mapPartitions(_python_pids)))),
        }), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
