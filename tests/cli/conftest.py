"""Fixtures for CLI tests: run the real ``lurcher`` command (``python -m lurcher.sdk.cli``)
as a subprocess against the real ``server`` fixture, with a private contexts file.

``cli(*args, input=None, env=None, check=None)`` -> ``Result`` (code, out, err);
``check=0`` asserts the exit code. ``lurcher``: the same, already pointed at the server
with a root connection string (``--connection`` given before the command).
``run_capped(args, config, env)`` runs it with its address space capped at 1 GiB (for
inputs that must not be read whole: on a regression it fails with MemoryError instead of
exhausting the machine). ``spawn(*args)`` starts the command in the background (for ``--follow``); its stdout lines
arrive on ``proc.lines`` (a queue; None at end of output).
"""

from __future__ import annotations

import json
import os
import queue
import resource
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import REPO_ROOT, LurcherServer

CLI = (sys.executable, "-m", "lurcher.sdk.cli")
RUN_TIMEOUT_S = 60


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def lines(self) -> list[str]:
        return self.out.splitlines()

    def json_lines(self) -> list[dict]:
        return [json.loads(line) for line in self.lines() if line.strip()]


def cli_env(config: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LURCHER_")}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env["LURCHER_CLI_CONFIG"] = str(config)
    return {**env, **(extra or {})}


Cli = Callable[..., Result]
CAPPED_ADDRESS_SPACE = 2**30


def _address_space_capped() -> None:
    """In the child: at most ``CAPPED_ADDRESS_SPACE`` (the CLI needs far less)."""
    resource.setrlimit(resource.RLIMIT_AS, (CAPPED_ADDRESS_SPACE, CAPPED_ADDRESS_SPACE))


def run_capped(args: list[str], config: Path, env: Mapping[str, str] | None = None) -> Result:
    proc = subprocess.run([*CLI, *args], capture_output=True, env=cli_env(config, env),
                          timeout=RUN_TIMEOUT_S * 2, stdin=subprocess.DEVNULL,
                          preexec_fn=_address_space_capped)
    return Result(proc.returncode, proc.stdout.decode(errors="replace"),
                  proc.stderr.decode(errors="replace"))


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    return tmp_path / "cli" / "contexts.json"


@pytest.fixture
def cli(config_file: Path) -> Cli:
    def run(*args: str, input: bytes | str | None = None, env: Mapping[str, str] | None = None,
            check: int | None = None) -> Result:
        data = input.encode() if isinstance(input, str) else input
        proc = subprocess.run([*CLI, *args], input=data, capture_output=True,
                              env=cli_env(config_file, env), timeout=RUN_TIMEOUT_S,
                              stdin=None if data is not None else subprocess.DEVNULL)
        result = Result(proc.returncode, proc.stdout.decode(errors="replace"),
                        proc.stderr.decode(errors="replace"))
        if check is not None:
            assert result.code == check, f"lurcher {' '.join(args)} -> {result}"
        return result
    return run


def root_connection(server: LurcherServer) -> str:
    return f"iggy://iggy:iggy@{server.tcp_address}"


@pytest.fixture
def lurcher(cli: Cli, server: LurcherServer) -> Cli:
    """``cli`` with ``--connection <root@server>`` prepended."""
    def run(*args: str, **kw: Any) -> Result:
        return cli("--connection", root_connection(server), *args, **kw)
    return run


@pytest.fixture
def spawn(config_file: Path, server: LurcherServer) -> Iterator[Callable[..., subprocess.Popen]]:
    procs: list[subprocess.Popen] = []

    def start(*args: str) -> subprocess.Popen:
        proc = subprocess.Popen([*CLI, "--connection", root_connection(server), *args],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=cli_env(config_file))
        procs.append(proc)
        proc.lines = queue.Queue()  # type: ignore[attr-defined]

        def pump() -> None:
            for line in proc.stdout:  # type: ignore[union-attr]
                proc.lines.put(line)  # type: ignore[attr-defined]
            proc.lines.put(None)  # type: ignore[attr-defined]
        threading.Thread(target=pump, daemon=True).start()
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
