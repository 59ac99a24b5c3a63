"""Every README code block a user would type runs against a real server, in README order
(the blocks are one walk-through: later ones use the stream the first one created).

Not run here, and why (``NOT_RUN``): the install commands, which ``tests/setup/
test_bare_machine.py`` runs in a fresh virtualenv; the Spark block, which needs a Spark
session: ``tests/spark/test_spark_readme.py`` runs it; the two blocks of the 3-node cluster,
which ``tests/cluster/test_cluster_readme.py`` runs against three nodes. A new block fails
``test_every_block_is_run_or_explained`` until it is covered.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.readme import Block, code_blocks, localize, run_python

NOT_RUN = {
    "pip install -e .": "the install commands: tests/setup/test_bare_machine.py",
    "register(spark)": "needs a Spark session: tests/spark/test_spark_readme.py",
    "configs/cluster/node-1.toml": "starts 3 nodes: tests/cluster/test_cluster_readme.py",
    "stream create payments": "needs the 3 nodes: tests/cluster/test_cluster_readme.py",
}
# Blocks that run until interrupted: stopped once they printed what they must.
FOREVER_PY = {"async for message in Consumer(": ['b\'{"id": 1}\'', 'b\'{"id": 2}\'']}
FOREVER_SH = {"--follow": '{"id": 1}'}
PY_TIMEOUT_S = 15.0
SH_TIMEOUT_S = 60.0
ALL_TRANSPORTS = {
    "LURCHER_QUIC_ENABLED": "true", "LURCHER_QUIC_ADDRESS": "127.0.0.1:0",
    "LURCHER_HTTP_ENABLED": "true", "LURCHER_HTTP_ADDRESS": "127.0.0.1:0",
    "LURCHER_WEBSOCKET_ENABLED": "true", "LURCHER_WEBSOCKET_ADDRESS": "127.0.0.1:0",
}


def skipped_reason(block: Block) -> str | None:
    return next((why for marker, why in NOT_RUN.items() if marker in block.text), None)


def runnable() -> list[Block]:
    return [b for b in code_blocks() if skipped_reason(b) is None]


def test_every_block_is_run_or_explained():
    blocks = code_blocks()
    assert len(blocks) >= 4
    for block in blocks:
        assert block.lang in ("sh", "python"), f"{block.name}: no runner for {block.lang!r}"
    assert len(runnable()) == len(blocks) - len(NOT_RUN), "a NOT_RUN marker matches no block"


def shell_env(tmp_path: Path) -> dict[str, str]:
    from tests.support.server import REPO_ROOT
    env = {**os.environ, "LURCHER_CLI_CONFIG": str(tmp_path / "contexts.json")}
    env["PATH"] = os.pathsep.join((str(Path(sys.executable).parent), env.get("PATH", "")))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", ""))
                                        if p)
    return env


def run_shell_line(line: str, env: dict[str, str], where: str) -> None:
    marker = next((m for m in FOREVER_SH if m in line), None)
    if marker is None:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", line], env=env, text=True,
                              capture_output=True, timeout=SH_TIMEOUT_S, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, f"{where}: `{line}` exited {done.returncode}\n{done.stderr}"
        return
    proc = subprocess.Popen(["bash", "-c", f"exec {line}"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
    deadline = time.monotonic() + SH_TIMEOUT_S
    out = ""
    while FOREVER_SH[marker] not in out and time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(queue.Empty):
            out += lines.get(timeout=0.2)
    still_running = proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(SH_TIMEOUT_S)
    err = proc.stderr.read()
    assert FOREVER_SH[marker] in out, f"{where}: `{line}` printed {out!r}\n{err}"
    assert still_running and code == 0, f"{where}: `{line}` exited {code}\n{err}"


def run_block(block: Block, server, tmp_path: Path) -> None:
    text = localize(block.text, server)
    if block.lang == "sh":
        env = shell_env(tmp_path)
        for line in (raw.strip() for raw in text.splitlines()):
            if line and not line.startswith("#"):
                run_shell_line(line, env, block.name)
        return
    forever = next((m for m in FOREVER_PY if m in text), None)
    printed = run_python(text, {"__name__": "readme"}, PY_TIMEOUT_S if forever else None)
    for expected in FOREVER_PY.get(forever, []):
        assert expected in printed, f"{block.name} printed {printed!r}"


def test_readme_blocks_run_against_a_real_server(server_factory, tmp_path: Path):
    server = server_factory(ALL_TRANSPORTS)
    for block in runnable():
        run_block(block, server, tmp_path)


def test_ci_runs_exactly_the_readme_test_command():
    from tests.support.server import REPO_ROOT
    (install,) = [b for b in code_blocks() if "pip install -e ." in b.text]
    command = [line for line in install.text.splitlines() if line and not line.startswith("#")][-1]
    assert command == "scripts/test"
    ci = (REPO_ROOT / ".ci" / "run").read_text().splitlines()
    assert [line for line in ci if line and not line.startswith(("#", "set ", "cd "))] == [
        command]
