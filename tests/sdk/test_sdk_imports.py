"""The SDK depends on ``lurcher.core.wire`` only: importing it loads no server internals."""

from __future__ import annotations

import subprocess
import sys

FORBIDDEN = ("lurcher.core.shard", "lurcher.core.log", "lurcher.core.meta",
             "lurcher.transports", "lurcher.auth", "lurcher.server", "lurcher.runtime")


def test_sdk_imports_no_server_modules() -> None:
    code = ("import sys, lurcher.sdk, lurcher.sdk.sync, lurcher.sdk.consumer, "
            "lurcher.sdk.producer, lurcher.sdk.encryption; "
            "print('\\n'.join(m for m in sys.modules if m.startswith('lurcher')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert "lurcher.sdk.client" in out
    assert [m for m in out if m.startswith(FORBIDDEN)] == []
