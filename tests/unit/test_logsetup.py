"""``[system.logging]``: JSON lines and a size-rotated log file."""

from __future__ import annotations

import json
import logging

import pytest

from lurcher import logsetup


@pytest.fixture
def restore_root_logger():
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    for handler in saved:
        root.addHandler(handler)
    root.setLevel(level)


def test_log_file_rotates_at_max_size_keeping_backups(tmp_path, restore_root_logger):
    settings = {"level": "info", "format": "json", "file": "logs/server.log", "backups": 2}
    logsetup.configure(settings, tmp_path, max_bytes=2000)
    for i in range(100):
        logging.getLogger("lurcher.test").info("line %d %s", i, "x" * 40)
    names = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert names == ["server.log", "server.log.1", "server.log.2"]
    last = (tmp_path / "logs" / "server.log").read_text().splitlines()[-1]
    assert json.loads(last)["message"].startswith("line 99 ")


def test_text_format_and_level(tmp_path, restore_root_logger):
    logsetup.configure({"level": "warning", "file": "out.txt"}, tmp_path, max_bytes=10**6)
    logging.getLogger("lurcher.test").info("hidden")
    logging.getLogger("lurcher.test").warning("shown")
    text = (tmp_path / "out.txt").read_text()
    assert "WARNING lurcher.test: shown" in text and "hidden" not in text
