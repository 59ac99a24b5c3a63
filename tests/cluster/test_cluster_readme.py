"""README "A 3-node cluster on one machine", run as a user would type it.

The section's first block starts the three nodes with the configuration files shipped in
``configs/cluster``; its second block uses them through the CLI. The test copies those files
into a temporary directory (the working directory of every command, so ``local_data`` lands
there), moves every port they name to a free one (in the files and in the commands alike),
starts each ``lurcher-server`` line in the background, runs the other lines, checks that the
stream created on node 1 is listed by node 3 and that the status names a leader, and stops
the nodes with SIGTERM (each must exit 0).
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

from tests.docs.test_readme import shell_env
from tests.support.readme import code_blocks
from tests.support.server import REPO_ROOT, START_TIMEOUT_S, STOP_TIMEOUT_S, free_ports

START_MARKER = "configs/cluster/node-1.toml"
USE_MARKER = "stream create payments"
PORT = re.compile(r"(?<![\d.])(8[0-2]9[0-5]|8[0-2]80|3[0-2]00)(?!\d)")
LIVENESS_S = 30.0  # a bound on the election, not a performance figure


def section_lines(marker: str) -> list[str]:
    (block,) = [b for b in code_blocks() if marker in b.text]
    return [line.strip() for line in block.text.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def shipped_ports() -> list[str]:
    found: set[str] = set()
    for config in (REPO_ROOT / "configs" / "cluster").glob("node-*.toml"):
        found.update(PORT.findall(config.read_text()))
    return sorted(found)


def relocate(text: str, ports: dict[str, str]) -> str:
    return PORT.sub(lambda m: ports.get(m.group(0), m.group(0)), text)


def run(line: str, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", line], cwd=cwd, env=env,
                          text=True, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"`{line}` exited {done.returncode}\n{done.stderr}"
    return done.stdout


def until_leader(line: str, cwd: Path, env: dict[str, str]) -> str:
    deadline = time.monotonic() + LIVENESS_S
    while True:
        done = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, text=True,
                              capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        if done.returncode == 0 and "leader" in done.stdout:
            return done.stdout
        assert time.monotonic() < deadline, f"`{line}`: no leader within {LIVENESS_S}s\n" \
                                            f"{done.stdout}{done.stderr}"
        time.sleep(0.3)


def test_the_readme_starts_a_three_node_cluster_and_uses_it(tmp_path: Path):
    original = shipped_ports()
    assert len(original) == 15, original  # 5 ports x 3 nodes, all moved below
    ports = dict(zip(original, map(str, free_ports(len(original)))))
    (tmp_path / "configs" / "cluster").mkdir(parents=True)
    for config in (REPO_ROOT / "configs" / "cluster").glob("node-*.toml"):
        (tmp_path / "configs" / "cluster" / config.name).write_text(
            relocate(config.read_text(), ports))
    env = shell_env(tmp_path)
    starts = [relocate(line, ports) for line in section_lines(START_MARKER)]
    assert len(starts) == 3 and all(s.startswith("lurcher-server ") for s in starts)
    nodes = []
    try:
        for number, line in enumerate(starts, 1):
            out = open(tmp_path / f"node-{number}.out", "wb")
            nodes.append(subprocess.Popen(["bash", "-c", f"exec {line}"], cwd=tmp_path, env=env,
                                          stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL))
        for number in (1, 2, 3):
            ready = tmp_path / "local_data" / f"node-{number}" / "runtime" / "endpoints.json"
            deadline = time.monotonic() + START_TIMEOUT_S
            while not ready.exists():
                assert time.monotonic() < deadline and nodes[number - 1].poll() is None, \
                    (tmp_path / f"node-{number}.out").read_text()
                time.sleep(0.05)
        uses = [relocate(line, ports) for line in section_lines(USE_MARKER)]
        status = until_leader(uses[0], tmp_path, env)
        assert status.count("node-") >= 3, status
        printed = [run(line, tmp_path, env) for line in uses[1:]]
        assert "payments" in printed[-1], printed  # created on node 1, listed by node 3
    finally:
        for node in nodes:
            node.send_signal(signal.SIGTERM)
        codes = [node.wait(STOP_TIMEOUT_S) for node in nodes]
    assert codes == [0, 0, 0]
