"""Throughput of the lurcher Spark data source beside Parquet, on local[2], in one run.

    PYTHONPATH=. python scripts/spark_throughput.py [--messages 1000000] [--size 1024]
        [--partitions 2] [--connection iggy://iggy:iggy@127.0.0.1:8090]

Without ``--connection`` it starts a lurcher server (TCP on loopback, data in a temporary
directory). Steps, each timed alone (wall clock, including Spark's job overhead):

0. warm-up (untimed): a few rows through both formats;
1. write: ``N`` cached rows (``partition``, an incompressible ``size``-byte ``payload``)
   -> lurcher;
2. the same DataFrame -> Parquet files on disk;
3. read lurcher: every message, summing payload lengths (so every payload is read);
4. read Parquet: the same aggregation over the same rows.

Prints rows/s and MB/s (payload bytes / 10**6) per step. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def lurcher_server(connection: str | None, work: Path) -> Iterator[str]:
    if connection:
        yield connection
        return
    sys.path.insert(0, str(REPO))
    from tests.support.server import LurcherServer

    with LurcherServer().start(work / "lurcher") as server:
        yield f"iggy://iggy:iggy@{server.tcp_address}"


def spark_session():
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    return (SparkSession.builder.master("local[2]").appName("lurcher-throughput")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.memory", "3g")
            .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
            .config("spark.sql.shuffle.partitions", "2").getOrCreate())


def timed(label: str, rows: int, payload_bytes: int, run: Callable[[], object]) -> None:
    start = time.perf_counter()
    result = run()
    seconds = time.perf_counter() - start
    print(f"{label:<22} {seconds:8.1f} s {rows / seconds:12,.0f} rows/s "
          f"{payload_bytes / seconds / 1e6:8.1f} MB/s   ({result})", flush=True)


def payloads(spark, n: int, size: int, partitions: int):
    """``n`` rows (``partition``, ``payload``): incompressible payloads of ``size`` bytes
    (SHA-256 blocks of the row number), cached in memory so generating them is timed in
    neither write."""
    from pyspark.sql import functions as F

    blocks = [F.unhex(F.sha2(F.concat(F.col("id").cast("string"), F.lit(f"/{i}")), 256))
              for i in range(-(-size // 32))]
    rows = spark.range(0, n, numPartitions=partitions).select(
        (F.col("id") % partitions).cast("int").alias("partition"),
        F.substring(F.concat(*blocks), 1, size).alias("payload")).cache()
    rows.count()
    return rows


def warm_up(spark, rows, conn: str, stream: str, topic: str, tmp: Path) -> None:
    """Untimed: the JVM and both formats' code paths run once before anything is timed."""
    from lurcher.sdk.sync import SyncClient

    with SyncClient.from_connection_string(conn) as client:
        client.create_topic(stream, topic + "-warm-up", partitions_count=1)
    options = {"connection": conn, "stream": stream, "topic": topic + "-warm-up"}
    rows.select("payload").write.format("lurcher").mode("append").options(**options).save()
    spark.read.format("lurcher").options(**options).load().count()
    rows.write.parquet(str(tmp / "warm-up"))
    spark.read.parquet(str(tmp / "warm-up")).count()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=1024, help="payload bytes")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--connection")
    args = parser.parse_args()

    from pyspark.sql import functions as F

    import lurcher.spark
    from lurcher.sdk.sync import SyncClient

    n, size = args.messages, args.size
    with tempfile.TemporaryDirectory() as tmp, lurcher_server(args.connection, Path(tmp)) as conn:
        stream, topic = "throughput", f"t{int(time.time())}"
        with SyncClient.from_connection_string(conn) as client:
            if client.get_stream(stream) is None:
                client.create_stream(stream)
            client.create_topic(stream, topic, partitions_count=args.partitions)
        spark = spark_session()
        spark.sparkContext.setLogLevel("ERROR")
        lurcher.spark.register(spark)
        source = payloads(spark, n, size, args.partitions)
        options = {"connection": conn, "stream": stream, "topic": topic}
        warm_up(spark, source.limit(1000), conn, stream, topic, Path(tmp))
        parquet = str(Path(tmp) / "parquet")
        total = n * size
        print(f"{n:,} messages x {size} B, {args.partitions} partitions, local[2]")
        timed("write lurcher", n, total,
              lambda: source.write.format("lurcher").mode("append").options(**options).save())
        timed("write parquet", n, total, lambda: source.write.parquet(parquet))

        def summed(df) -> tuple:
            return tuple(df.agg(F.count("*"), F.sum(F.length("payload"))).first())
        timed("read lurcher", n, total,
              lambda: summed(spark.read.format("lurcher").options(**options).load()))
        timed("read parquet", n, total, lambda: summed(spark.read.parquet(parquet)))
        spark.stop()


if __name__ == "__main__":
    main()
