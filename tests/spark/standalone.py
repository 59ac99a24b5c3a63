"""A Spark standalone cluster (one master, one worker) from the installed pyspark, for tests.

Both daemons run ``bin/spark-class`` of the pyspark package (SPARK_HOME = the package
directory) on loopback with ephemeral ports (``--port 0 --webui-port 0``, REST server
off), each in its own process group, output in ``<work_dir>/<name>.out``. The master URL
and the worker's registration are read from that output. ``close()`` SIGTERMs then
SIGKILLs exactly the groups it started.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 20.0
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class StandaloneCluster:
    def __init__(self, work_dir: Path, env: dict[str, str], worker_cores: int = 2,
                 worker_memory: str = "1g") -> None:
        self.work_dir = work_dir
        self.env = {**env, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
                    "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
                    "SPARK_LOG_DIR": str(work_dir), "SPARK_WORKER_DIR": str(work_dir / "work")}
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.master_url = ""

    def _spawn(self, name: str, *args: str) -> None:
        with open(self.work_dir / f"{name}.out", "ab") as out:
            self.procs[name] = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args], env=self.env,
                cwd=self.work_dir, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True)

    def _wait_for(self, name: str, pattern: str) -> re.Match[str]:
        deadline = time.monotonic() + START_TIMEOUT_S
        path = self.work_dir / f"{name}.out"
        while time.monotonic() < deadline:
            found = re.search(pattern, path.read_text(errors="replace"))
            if found:
                return found
            if self.procs[name].poll() is not None:
                break
            time.sleep(0.25)
        raise AssertionError(f"spark {name} did not report {pattern!r}:\n"
                             f"{path.read_text(errors='replace')[-3000:]}")

    def start(self) -> "StandaloneCluster":
        """Master, then a worker registered with it. Raises AssertionError on timeout."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._spawn("master", MASTER_CLASS, "--host", "127.0.0.1", "--port", "0",
                    "--webui-port", "0")
        self.master_url = self._wait_for("master", r"Starting Spark master at (spark://\S+)")[1]
        self._spawn("worker", WORKER_CLASS, self.master_url, "--host", "127.0.0.1",
                    "--port", "0", "--webui-port", "0", "--cores", str(self.worker_cores),
                    "--memory", self.worker_memory, "--work-dir", str(self.work_dir / "work"))
        self._wait_for("worker", r"Successfully registered with master")
        return self

    def close(self) -> None:
        for proc in self.procs.values():
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for proc in self.procs.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(proc, signal.SIGKILL)
            proc.wait()

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
