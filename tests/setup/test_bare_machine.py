"""As close to a bare machine as this one allows: a fresh virtualenv, a PATH without the
optional programs (nats-server, redis-server, java, chromium, a C compiler, apt-get), no
JAVA_HOME.

- README command 1 (``pip install -e .``) builds nothing (CC is /bin/false), and the server
  it installs starts, with ``system.io = "auto"`` falling back to posix in one log line;
  ``lurcher-mcp`` names the extra it needs.
- The test command's dependency step (``lurcher.devtools.system_deps``, run by
  ``scripts/test``) finds every missing program and names the apt packages; without root
  or apt-get it prints the one ``apt-get`` line to run; as root it really installs a missing
  program (``nats-server`` is removed, the step reinstalls it).
- A test whose program is missing fails in one line naming the package, no traceback.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lurcher.devtools.system_deps import SYSTEM_TOOLS
from tests.support.server import REPO_ROOT

INSTALL_TIMEOUT_S = 900
START_TIMEOUT_S = 30


def bare_path(tmp_path: Path, *extra_dirs: Path) -> str:
    """A PATH with only ``python``/``python3`` (this interpreter) and ``extra_dirs``."""
    bin_dir = tmp_path / "bare-bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("python", "python3"):
        link = bin_dir / name
        if not link.exists():
            link.symlink_to(sys.executable)
    return os.pathsep.join([*map(str, extra_dirs), str(bin_dir)])


def bare_env(tmp_path: Path, *extra_dirs: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAVA_HOME", "PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("LURCHER_")}
    env.update(PATH=bare_path(tmp_path, *extra_dirs), CC="/bin/false", CXX="/bin/false")
    return env


@pytest.mark.slow
def test_readme_command_1_installs_without_a_compiler_and_starts_the_server(tmp_path: Path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = bare_env(tmp_path, venv / "bin")
    install = subprocess.run([str(venv / "bin" / "pip"), "install", "-e", str(REPO_ROOT)],
                             env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    built = re.findall(r"Building wheel for (\S+)", install.stdout)
    assert built == [], f"command 1 built from source: {built}"
    probe = subprocess.run([str(venv / "bin" / "python"), "-c", "import liburing"], env=env,
                           capture_output=True, text=True)
    assert probe.returncode != 0  # io_uring is the [uring] extra, not the base install

    mcp = subprocess.run([str(venv / "bin" / "lurcher-mcp"), "--help"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert mcp.returncode == 1
    (line,) = mcp.stderr.strip().splitlines()
    assert line.startswith("lurcher-mcp: the ") and line.endswith(
        "module is missing; install the mcp extra: pip install 'lurcher[mcp]'")

    data = tmp_path / "data"
    server_env = {**env, "LURCHER_SYSTEM_PATH": str(data), "LURCHER_SYSTEM_IO": "auto",
                  **{f"LURCHER_{t}_ADDRESS": "127.0.0.1:0"
                     for t in ("TCP", "QUIC", "HTTP", "WEBSOCKET")}}
    output = tmp_path / "server-output.txt"
    with open(output, "w") as out:
        proc = subprocess.Popen([str(venv / "bin" / "lurcher-server"),
                                 "--with-default-root-credentials"], cwd=tmp_path,
                                env=server_env, stdout=out, stderr=subprocess.STDOUT)
    try:
        endpoints = data / "runtime" / "endpoints.json"
        deadline = time.monotonic() + START_TIMEOUT_S
        while not endpoints.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert endpoints.exists(), output.read_text()
        assert set(json.loads(endpoints.read_text())) == {"tcp", "quic", "http", "websocket"}
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    log = output.read_text()
    assert "io_uring unavailable" in log and "pip install 'lurcher[uring]'" in log


def test_dependency_step_names_every_missing_program_and_its_package(tmp_path: Path):
    env = {**bare_env(tmp_path), "PYTHONPATH": str(REPO_ROOT)}
    del env["CC"]
    check = subprocess.run([sys.executable, "-m", "lurcher.devtools.system_deps", "check"],
                           env=env, capture_output=True, text=True, cwd=REPO_ROOT)
    assert check.returncode == 1
    lines = check.stdout.strip().splitlines()
    # Python.h and rabbitmq-server are found by absolute path, which a bare PATH cannot hide.
    missing = {name for name in SYSTEM_TOOLS if name not in ("Python.h", "rabbitmq-server")}
    for name in missing:
        tool = SYSTEM_TOOLS[name]
        assert any(line.startswith(f"{name} is not installed")
                   and line.endswith(f"apt-get install -y {tool.package}") for line in lines), lines

    install = subprocess.run([sys.executable, "-m", "lurcher.devtools.system_deps", "install"],
                             env=env, capture_output=True, text=True, cwd=REPO_ROOT)
    assert install.returncode == 1
    (line,) = install.stderr.strip().splitlines()
    packages = sorted({SYSTEM_TOOLS[n].package for n in missing})
    assert line.endswith("apt-get update && apt-get install -y " + " ".join(packages))


@pytest.mark.parametrize("test_id,message", [
    ("tests/bench/test_bench_workloads.py::test_compare_runs_lurcher_and_every_peer",
     "nats-server is not installed (needed by the bench `compare` tests): "
     "apt-get install -y nats-server; redis-server is not installed"),
    ("tests/spark/test_spark_readme.py",
     "java is not installed (needed by the Spark tests): apt-get install -y "
     "openjdk-17-jre-headless"),
])
def test_a_test_needing_a_missing_program_fails_in_one_line(tmp_path: Path, test_id: str,
                                                            message: str):
    env = {**bare_env(tmp_path), "PYTHONPATH": str(REPO_ROOT)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-x", test_id], env=env, capture_output=True, text=True,
                         cwd=REPO_ROOT, timeout=300)
    assert run.returncode == 1
    assert message in run.stdout, run.stdout[-3000:]
    assert "Traceback" not in run.stdout and "JAVA_GATEWAY_EXITED" not in run.stdout


@pytest.mark.slow
def test_dependency_step_installs_a_missing_program_with_apt(tmp_path: Path):
    """The real thing, once: take ``nats-server`` off the machine, run the dependency step of
    the test command, and find it installed again. Needs root and apt-get (as CI has); the
    package is reinstalled even if the step fails, so the machine is left as it was."""
    import shutil
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip("installing Debian packages needs root and apt-get (CI runs as root)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive", "PYTHONPATH": str(REPO_ROOT)}
    subprocess.run(["apt-get", "remove", "-y", "-qq", "nats-server"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    try:
        assert shutil.which("nats-server") is None
        step = subprocess.run([sys.executable, "-m", "lurcher.devtools.system_deps", "install"],
                              env=env, capture_output=True, text=True, cwd=REPO_ROOT,
                              timeout=INSTALL_TIMEOUT_S)
        assert step.returncode == 0, step.stdout + step.stderr
        assert "installing system packages for the tests: nats-server" in step.stdout
        assert shutil.which("nats-server") is not None
    finally:
        if shutil.which("nats-server") is None:
            subprocess.run(["apt-get", "install", "-y", "-qq", "nats-server"], env=env,
                           stdout=subprocess.DEVNULL)
