"""Servers the bench starts for itself: lurcher, a 3-node lurcher cluster
(``lurcher.bench.cluster``), nats-server (JetStream), redis-server, rabbitmq-server (Streams
plugin).

Each ``start_*`` spawns the server on 127.0.0.1 over a fresh temporary data directory, waits
until it accepts connections, and returns a ``ManagedServer`` (address, pid, data dir) whose
``stop`` terminates it and deletes the directory. Peers get an ephemeral port picked by the
kernel (bind to port 0, read it, close; the tiny race is acceptable for a benchmark).
A missing peer binary raises ``MissingBinaryError`` naming the Debian package to install.

Invariants: the server's output goes to ``<data_dir>/server-output.txt``; ``stop`` is
idempotent and never leaves the process running (SIGTERM, then SIGKILL after a timeout).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lurcher

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
OUTPUT_FILE = "server-output.txt"
REPO_ROOT = Path(lurcher.__file__).resolve().parents[1]

# target -> (binary, Debian package)
BINARIES = {"nats": ("nats-server", "nats-server"), "redis": ("redis-server", "redis-server"),
            "rabbitmq": ("rabbitmq-server", "rabbitmq-server")}
# Debian installs the real start script here (/usr/sbin/rabbitmq-server is a wrapper that
# switches to the rabbitmq user)
RABBITMQ_SCRIPT = "/usr/lib/rabbitmq/bin/rabbitmq-server"


class ServerStartError(RuntimeError):
    """A server did not become ready (the message carries the tail of its output)."""


class MissingBinaryError(ServerStartError):
    """A peer's server binary is not installed."""


class ManagedServer:
    """A server process we started, its address and its temporary data directory."""

    def __init__(self, name: str, proc: subprocess.Popen[bytes], address: str,
                 data_dir: Path) -> None:
        self.name = name
        self.proc = proc
        self.address = address
        self.data_dir = data_dir
        self.notes: list[str] = []
        self.after_stop: list[list[str]] = []  # commands run once the server has stopped

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        """Terminate the server and delete its data directory. Idempotent."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:  # the whole session: a start script's child too
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for argv in self.after_stop:
            subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True)
        self.after_stop = []
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> ManagedServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def output_tail(data_dir: Path, chars: int = 3000) -> str:
    try:
        return (data_dir / OUTPUT_FILE).read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def require_binary(target: str) -> str:
    """The path of ``target``'s server binary. Raises MissingBinaryError naming the package."""
    binary, package = BINARIES[target]
    path = shutil.which(binary)
    if path is None:
        raise MissingBinaryError(
            f"{binary} not found on PATH: install the Debian package with "
            f"`apt-get update && apt-get install -y {package}`")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn(name: str, argv: list[str], data_dir: Path, env: dict[str, str] | None = None,
           cwd: Path | None = None) -> subprocess.Popen[bytes]:
    with open(data_dir / OUTPUT_FILE, "ab") as out:
        return subprocess.Popen(argv, cwd=cwd or data_dir, env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _wait(server: ManagedServer, ready) -> ManagedServer:
    """Poll ``ready()`` until true; on exit or timeout stop the server and raise."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            tail = output_tail(server.data_dir)
            server.stop()
            raise ServerStartError(f"{server.name} exited with {server.proc.returncode}:\n{tail}")
        if ready():
            return server
        time.sleep(0.02)
    tail = output_tail(server.data_dir)
    server.stop()
    raise ServerStartError(f"{server.name} not ready within {START_TIMEOUT_S}s:\n{tail}")


def _accepts(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=0.2):
            return True
    except OSError:
        return False


# bench --transport -> (config section, key in endpoints.json)
LURCHER_LISTENERS = {"tcp": ("TCP", "tcp"), "ws": ("WEBSOCKET", "websocket"),
                     "quic": ("QUIC", "quic"), "http": ("HTTP", "http")}


def lurcher_env(data_dir: Path, enforce_fsync: bool, transport: str) -> dict[str, str]:
    """The environment of a bench lurcher server: TCP and ``transport`` on ephemeral ports,
    the other listeners off, fsync as asked."""
    env = {**os.environ, "LURCHER_SYSTEM_PATH": str(data_dir),
           "LURCHER_TCP_ADDRESS": "127.0.0.1:0", "LURCHER_HTTP_ENABLED": "false",
           "LURCHER_QUIC_ENABLED": "false", "LURCHER_WEBSOCKET_ENABLED": "false",
           "LURCHER_SYSTEM_PARTITION_ENFORCE_FSYNC": "true" if enforce_fsync else "false",
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO_ROOT),
                                                     os.environ.get("PYTHONPATH")) if p)}
    section = LURCHER_LISTENERS[transport][0]
    env[f"LURCHER_{section}_ENABLED"] = "true"
    env[f"LURCHER_{section}_ADDRESS"] = "127.0.0.1:0"
    return env


def start_lurcher(enforce_fsync: bool = False, transport: str = "tcp") -> ManagedServer:
    """``python -m lurcher.server`` (root iggy/iggy) on a temp dir, listening on TCP and on
    ``transport`` (an ephemeral port each). Raises ServerStartError."""
    data_dir = Path(tempfile.mkdtemp(prefix="lurcher-bench-"))
    env = lurcher_env(data_dir, enforce_fsync, transport)
    key = LURCHER_LISTENERS[transport][1]
    proc = _spawn("lurcher", [sys.executable, "-m", "lurcher.server",
                              "--with-default-root-credentials"], data_dir, env)
    server = ManagedServer("lurcher", proc, "", data_dir)
    endpoints = data_dir / "runtime" / "endpoints.json"

    def ready() -> bool:
        try:
            server.address = json.loads(endpoints.read_text())[key]
        except (OSError, ValueError, KeyError):
            return False
        return True
    return _wait(server, ready)


def start_redis(enforce_fsync: bool = False, transport: str = "tcp") -> ManagedServer:
    """redis-server with AOF (appendfsync everysec, or always with ``enforce_fsync``), no RDB
    snapshots. Raises MissingBinaryError or ServerStartError."""
    binary = require_binary("redis")
    data_dir = Path(tempfile.mkdtemp(prefix="redis-bench-"))
    port = free_port()
    argv = [binary, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(data_dir),
            "--appendonly", "yes", "--appendfsync", "always" if enforce_fsync else "everysec",
            "--save", "", "--daemonize", "no", "--protected-mode", "yes"]
    server = ManagedServer("redis", _spawn("redis", argv, data_dir), f"127.0.0.1:{port}", data_dir)
    return _wait(server, lambda: _accepts(server.address))


def start_nats(enforce_fsync: bool = False, transport: str = "tcp") -> ManagedServer:
    """nats-server with JetStream file storage in a temp dir (``sync_interval: always`` with
    ``enforce_fsync``). Raises MissingBinaryError or ServerStartError."""
    binary = require_binary("nats")
    data_dir = Path(tempfile.mkdtemp(prefix="nats-bench-"))
    port = free_port()
    fsync_ok = enforce_fsync and nats_version(binary) >= (2, 10)
    sync = "\n  sync_interval: always" if fsync_ok else ""
    conf = data_dir / "nats.conf"
    conf.write_text(f'listen: "127.0.0.1:{port}"\nmax_payload: 8MB\n'
                    f'jetstream {{\n  store_dir: "{data_dir / "js"}"\n'
                    f'  max_memory_store: 1GB\n  max_file_store: 64GB{sync}\n}}\n')
    argv = [binary, "-c", str(conf)]
    server = ManagedServer("nats", _spawn("nats", argv, data_dir), f"127.0.0.1:{port}", data_dir)
    if enforce_fsync and not fsync_ok:
        server.notes.append("nats-server < 2.10 has no sync_interval: fsync not enforced")
    return _wait(server, lambda: _accepts(server.address))


def start_rabbitmq(enforce_fsync: bool = False, transport: str = "tcp") -> ManagedServer:
    """rabbitmq-server with the ``rabbitmq_stream`` plugin, every port on 127.0.0.1 (AMQP,
    stream, Erlang distribution and a private epmd, stopped with the server), its node name,
    data, logs, config and plugin list in a temp dir. The address is the stream port. Streams
    never fsync before confirming: ``enforce_fsync`` adds a note, changes nothing.
    Raises MissingBinaryError or ServerStartError."""
    require_binary("rabbitmq")
    data_dir = Path(tempfile.mkdtemp(prefix="rabbitmq-bench-"))
    amqp, stream, dist, epmd = (free_port() for _ in range(4))
    (data_dir / "rabbitmq.conf").write_text(
        f"listeners.tcp.default = 127.0.0.1:{amqp}\n"
        f"stream.listeners.tcp.1 = 127.0.0.1:{stream}\n"
        "stream.frame_max = 16777216\nloopback_users = none\n")
    (data_dir / "enabled_plugins").write_text("[rabbitmq_stream].\n")
    env = {**os.environ, "HOME": str(data_dir),  # the Erlang cookie goes there
           "RABBITMQ_NODENAME": f"lurcher-bench-{stream}@localhost",
           "RABBITMQ_MNESIA_BASE": str(data_dir / "mnesia"),
           "RABBITMQ_LOG_BASE": str(data_dir / "log"), "RABBITMQ_LOGS": "-",
           "RABBITMQ_CONFIG_FILE": str(data_dir / "rabbitmq.conf"),
           "RABBITMQ_ENABLED_PLUGINS_FILE": str(data_dir / "enabled_plugins"),
           "RABBITMQ_PID_FILE": str(data_dir / "rabbitmq.pid"),
           "RABBITMQ_DIST_PORT": str(dist),
           "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
           "ERL_EPMD_ADDRESS": "127.0.0.1", "ERL_EPMD_PORT": str(epmd)}
    proc = _spawn("rabbitmq", [RABBITMQ_SCRIPT], data_dir, env)
    server = ManagedServer("rabbitmq", proc, f"127.0.0.1:{stream}", data_dir)
    server.after_stop.append(["epmd", "-port", str(epmd), "-kill"])
    if enforce_fsync:
        server.notes.append("RabbitMQ Streams confirm before fsync: fsync not enforced")
    return _wait(server, lambda: _accepts(server.address))


def nats_version(binary: str) -> tuple[int, ...]:
    """(major, minor) of ``nats-server --version`` ((0, 0) when unreadable)."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"v(\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def start_lurcher_cluster(enforce_fsync: bool = False, transport: str = "tcp") -> ManagedServer:
    """Three lurcher nodes on loopback (``lurcher.bench.cluster``)."""
    from lurcher.bench import cluster  # it imports this module
    return cluster.start_lurcher_cluster(enforce_fsync, transport)


STARTERS = {"lurcher": start_lurcher, "nats": start_nats, "redis": start_redis,
            "rabbitmq": start_rabbitmq, "iggy-py": start_lurcher,
            "lurcher-cluster": start_lurcher_cluster}


def start(target: str, enforce_fsync: bool = False, transport: str = "tcp") -> ManagedServer:
    """Start ``target``'s server (peers always speak their own protocol over TCP).
    Raises MissingBinaryError or ServerStartError."""
    return STARTERS[target](enforce_fsync, transport)
