"""scripts/quic_memory_bench.py, which the README's in-memory QUIC figures come from, runs as
documented and prints both costs per MB."""

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
