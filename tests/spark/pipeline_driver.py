"""Driver program of the exactly-once tests, run as its own process so a test can SIGKILL
it: a streaming query reads topic A, transforms each payload to ``T:<payload>`` keeping
its partition, and writes topic B through the lurcher sink, checkpointed in
``<checkpoint>``; it commits its progress on A as consumer ``<consumer>``. It runs until
killed. ``master`` is ``local[2]`` or a standalone master URL.

    python pipeline_driver.py <master> <connection> <stream> <A> <B> <checkpoint> <consumer>
                              [<exactlyOnce: true (default) or false>]
"""

from __future__ import annotations

import os
import sys

PER_TRIGGER = "300"


def session(master: str):
    from pyspark.sql import SparkSession

    from spark_session import BASE_CONF, LOOPBACK

    builder = SparkSession.builder.master(master).appName("lurcher-exactly-once")
    for key, value in BASE_CONF.items():
        builder = builder.config(key, value)
    builder = (builder.config("spark.driver.memory", "512m")
               .config("spark.executor.memory", "512m")
               .config("spark.pyspark.python", sys.executable)
               .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", "")))
    if master.startswith("spark://"):
        builder = (builder.config("spark.executor.cores", "2").config("spark.cores.max", "2")
                   .config("spark.executorEnv.SPARK_LOCAL_IP", LOOPBACK))
    return builder.getOrCreate()


def main(master: str, connection: str, stream: str, source: str, sink: str,
         checkpoint: str, consumer: str, exactly_once: str = "true") -> None:
    from pyspark.sql import functions as F

    import lurcher.spark

    spark = session(master)
    spark.sparkContext.setLogLevel("ERROR")
    lurcher.spark.register(spark)
    query = (spark.readStream.format("lurcher").option("connection", connection)
             .option("stream", stream).option("topic", source)
             .option("startingOffsets", "earliest")
             .option("maxMessagesPerTrigger", PER_TRIGGER)
             .option("commitConsumer", consumer).load()
             .select(F.concat(F.lit(b"T:"), F.col("payload")).alias("payload"), "partition")
             .writeStream.format("lurcher").option("connection", connection)
             .option("stream", stream).option("topic", sink)
             .option("exactlyOnce", exactly_once).option("checkpointLocation", checkpoint)
             .trigger(processingTime="200 milliseconds").start())
    print("started", flush=True)
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:9])
