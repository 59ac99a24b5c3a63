"""Shared pytest fixtures: real server processes on port 0 over temporary data directories.

``server``: a started server over a fresh data dir, stopped (SIGTERM, exit 0 required) at
teardown. ``server_factory``: ``server_factory(extra_env=None, args=..., data_dir=None)``
starts more servers (custom env), all torn down the same way. The ``slow`` marker is
registered here, and the ``system`` marker: ``@pytest.mark.system("java")`` fails a test in
one line naming the Debian package when the program is missing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.support.server import DEFAULT_ARGS, LurcherServer, ServerFactory
from tests.support.system import require_system


def pytest_configure(config: pytest.Config) -> None:
    if not any(line.split(":")[0].strip() == "slow" for line in config.getini("markers")):
        config.addinivalue_line("markers", "slow: long-running test (crash loops, big payloads)")
    config.addinivalue_line("markers", "system(*names): needs these programs "
                            "(lurcher/devtools/system_deps.py); absent ones fail in one line")


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in item.iter_markers("system"):
        require_system(*marker.args)


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[ServerFactory]:
    """Start servers with custom env; each gets ``tmp_path/server-N`` unless ``data_dir`` is given."""
    started: list[LurcherServer] = []

    def start(extra_env: Mapping[str, str] | None = None, args: tuple[str, ...] = DEFAULT_ARGS,
              data_dir: Path | None = None) -> LurcherServer:
        srv = LurcherServer()
        started.append(srv)
        return srv.start(data_dir or tmp_path / f"server-{len(started)}", extra_env, args)

    yield start
    errors = []
    for srv in started:
        try:
            srv.close()
        except AssertionError as exc:
            errors.append(str(exc))
    if errors:
        pytest.fail("server teardown failed:\n" + "\n".join(errors))


@pytest.fixture
def server(server_factory: ServerFactory) -> LurcherServer:
    """A fresh server (TCP only, iggy/iggy root) on port 0."""
    return server_factory()
