"""scripts/quic_memory_bench.py and scripts/quic_encrypt_bench.py, which the README's
in-memory QUIC figures come from, run as documented and print their costs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_script_prints_build_and_receive_cost_per_megabyte() -> None:
    result = subprocess.run(
        [sys.executable, "scripts/quic_memory_bench.py", "--mtu", "1200", "--requests", "2",
         "--size", "100000"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    line = result.stdout.strip()
    assert re.fullmatch(r"1200-byte datagrams, 2 x 100000 B: build\+encrypt \d+\.\d\d ms/MB, "
                        r"receive\+decrypt \d+\.\d\d ms/MB", line), line


def test_the_encrypt_script_prints_a_cost_per_packet_for_each_size() -> None:
    result = subprocess.run(
        [sys.executable, "scripts/quic_encrypt_bench.py"], cwd=REPO, capture_output=True,
        text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    sizes = [re.fullmatch(r" *([\d,]+) bytes: +\d+\.\d\d us a packet", line) for line in lines]
    assert all(sizes) and [m.group(1) for m in sizes] == ["64,000", "8,000", "1,150"], lines
