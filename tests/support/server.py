"""A real ``lurcher-server`` process for integration and interop tests.

Owns: spawning ``<python> -m lurcher.server`` in its own process group with configuration
passed as ``LURCHER_*`` environment variables, waiting for ``<system.path>/runtime/
endpoints.json`` (the server writes it atomically once every listener is bound), and
stopping it (SIGTERM, must exit 0) or crashing it (SIGKILL to the whole group).

Invariants: at most one live process per ``LurcherServer``; ``start`` never returns before
endpoints.json names a TCP address; failures carry the tail of the server's output.
Server output goes to ``<data_dir>/server-output.txt`` (appended across restarts; its name
does not end in ``.log`` so segment-file globs never see it).
"""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0
OUTPUT_FILE = "server-output.txt"
LOG_TAIL_CHARS = 4000

DEFAULT_ENV: dict[str, str] = {
    "LURCHER_TCP_ADDRESS": "127.0.0.1:0",
    "LURCHER_HTTP_ENABLED": "false",
    "LURCHER_QUIC_ENABLED": "false",
    "LURCHER_WEBSOCKET_ENABLED": "false",
}
DEFAULT_ARGS: tuple[str, ...] = ("--with-default-root-credentials",)


class ServerError(AssertionError):
    """The server did not start, stop or crash as expected (message includes its output tail)."""


class LurcherServer:
    """One server process over one data directory; restartable on the same directory."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.data_dir: Path | None = None
        self.env: dict[str, str] = {}
        self.args: tuple[str, ...] = ()
        self.endpoints: dict[str, str] = {}
        self.starts = 0
        # (soft, hard) RLIMIT_NOFILE for the server process (None: inherit the test's)
        self.open_files_limit: tuple[int, int] | None = None

    # -- lifecycle

    def start(self, data_dir: Path | str, extra_env: Mapping[str, str] | None = None,
              args: Iterable[str] = DEFAULT_ARGS) -> LurcherServer:
        """Spawn the server on ``data_dir`` and wait for its endpoints. Raises ServerError."""
        if self.running:
            raise ServerError("server already running")
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.env = {**DEFAULT_ENV, "LURCHER_SYSTEM_PATH": str(self.data_dir), **(extra_env or {})}
        self.args = tuple(args)
        self._spawn()
        return self

    def _spawn(self) -> None:
        assert self.data_dir is not None
        self.endpoints_path.unlink(missing_ok=True)
        env = {**os.environ, **self.env}
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
        self.starts += 1
        with open(self.output_path, "ab") as out:
            out.write(f"\n===== start #{self.starts} {time.strftime('%H:%M:%S')} =====\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "lurcher.server", *self.args],
                cwd=self.data_dir, env=env, stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=self._limit_open_files if self.open_files_limit else None,
            )
        self._wait_ready()

    def _limit_open_files(self) -> None:
        """In the child before exec: apply ``open_files_limit`` (like ``ulimit -n``)."""
        resource.setrlimit(resource.RLIMIT_NOFILE, self.open_files_limit)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise ServerError(
                    f"server exited with {self.proc.returncode} before ready\n{self.log_tail()}")
            endpoints = self._read_endpoints()
            if endpoints is not None:
                self.endpoints = endpoints
                return
            time.sleep(0.02)
        self._kill_group()
        raise ServerError(
            f"no {self.endpoints_path} with a 'tcp' entry within {START_TIMEOUT_S}s\n{self.log_tail()}")

    def _read_endpoints(self) -> dict[str, str] | None:
        try:
            data = json.loads(self.endpoints_path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        return data if isinstance(data, dict) and data.get("tcp") else None

    def stop(self) -> int:
        """SIGTERM, wait, require exit status 0. Raises ServerError."""
        proc = self._require_proc()
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._kill_group()
            raise ServerError(f"server ignored SIGTERM for {STOP_TIMEOUT_S}s\n{self.log_tail()}")
        finally:
            self._reap_group()
        if code != 0:
            raise ServerError(f"server exited with {code} after SIGTERM (expected 0)\n{self.log_tail()}")
        return code

    def kill(self) -> None:
        """SIGKILL the server and every process of its group (a crash)."""
        self._require_proc()
        self._kill_group()

    def restart(self, *, crash: bool = False) -> LurcherServer:
        """Stop (or SIGKILL when ``crash``) and start again on the same data dir and config."""
        if self.running:
            self.kill() if crash else self.stop()
        self._spawn()
        return self

    def close(self) -> None:
        """Best-effort teardown: stop if running (errors propagate), never leaves processes."""
        if self.running:
            self.stop()

    def __enter__(self) -> LurcherServer:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is not None:
            if self.running:
                self._kill_group()
            return
        self.close()

    # -- helpers

    def _require_proc(self) -> subprocess.Popen[bytes]:
        if self.proc is None:
            raise ServerError("server was never started")
        return self.proc

    def _kill_group(self) -> None:
        proc = self._require_proc()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(STOP_TIMEOUT_S)
        self._reap_group()

    def _reap_group(self) -> None:
        """Leave no shard process of this server's group behind."""
        proc = self._require_proc()
        for _ in range(100):
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            except PermissionError:
                return
            time.sleep(0.02)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        try:
            text = self.output_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no server output)"
        return "----- server output (tail) -----\n" + text[-chars:]

    # -- properties

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        return self._require_proc().pid

    @property
    def endpoints_path(self) -> Path:
        assert self.data_dir is not None
        return self.data_dir / "runtime" / "endpoints.json"

    @property
    def output_path(self) -> Path:
        assert self.data_dir is not None
        return self.data_dir / OUTPUT_FILE

    @property
    def tcp_address(self) -> str:
        return self.endpoints["tcp"]

    @property
    def host(self) -> str:
        return self.tcp_address.rpartition(":")[0]

    @property
    def tcp_port(self) -> int:
        return int(self.tcp_address.rpartition(":")[2])


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback TCP ports free right now (held together while picked), for
    servers that must know each other's ports before they start.

    They are drawn below the kernel's ephemeral range, so no outgoing connection of this
    machine (a relay's, a client's) can take one as its source port while its server is down
    between a kill and a restart; the kernel's own choice (port 0) would come from that
    range. A port is handed out once per test process, so two calls (a cluster's client ports,
    then its replication ports) never return the same one."""
    rng = random.Random()
    socks: list[socket.socket] = []
    try:
        while len(socks) < count:
            port = rng.randrange(FIXED_PORTS_FROM, _ephemeral_start())
            if port in _HANDED_OUT:
                continue
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            socks.append(s)
            _HANDED_OUT.add(port)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


FIXED_PORTS_FROM = 10_000
_HANDED_OUT: set[int] = set()


def _ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range (32768 where it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def run_server_to_exit(args: Iterable[str], env: Mapping[str, str], cwd: Path,
                       timeout: float = START_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """Run ``python -m lurcher.server ARGS`` expected to exit by itself (refused start)."""
    full_env = {**os.environ, **DEFAULT_ENV, **env}
    full_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", "lurcher.server", *args], cwd=cwd,
                          env=full_env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


ServerFactory = Callable[..., LurcherServer]
"""The ``server_factory`` fixture: ``(extra_env=None, args=DEFAULT_ARGS, data_dir=None) -> LurcherServer``."""
