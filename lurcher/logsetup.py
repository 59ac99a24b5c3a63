"""The server's logging set-up from ``[system.logging]``: level, text or JSON lines, and an
optional log file with size-based rotation (in addition to stderr).

Invariants: one handler set per process, installed once (``configure`` replaces what was
there). With several shard processes only the process given ``rotate=True`` (the
supervisor, or the single server process) rotates the file; shard processes append through
a ``WatchedFileHandler``, which reopens the file after the supervisor rotated it; at most
``MAX_BACKUPS`` rotated files are kept (a rotation costs a step each). Log
lines never carry secrets: callers log user names, never passwords or tokens. ``configure``
takes the typed section (``runtime.settings.Logging``); a plain table given instead (tests,
tools) is completed from the packaged defaults, so no default is repeated here.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lurcher.runtime.settings import Logging

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Kept rotated files at most (``backups``): a rotation looks at every kept name in turn, on the
# thread that logs, so 2**64 of them hung the start at the first rotation.
MAX_BACKUPS = 1000
LEVELS = ("debug", "info", "warning", "error", "critical")
FORMATS = ("text", "json")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (ISO 8601, UTC), level, logger, message, pid."""

    converter = time.gmtime

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname, "logger": record.name,
            "message": record.getMessage(), "pid": record.process,
        }
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


def log_file_path(settings: Logging, data_path: Path) -> Path | None:
    """``system.logging.file`` as an absolute path (relative ones are under ``data_path``)."""
    return data_path / settings.file if settings.file else None


def typed(settings: Logging | Mapping[str, Any]) -> Logging:
    """The typed ``[system.logging]``; a plain (partial) table is completed from the packaged
    defaults. Raises ConfigError for a bad table."""
    if not isinstance(settings, Mapping):
        return settings
    from lurcher.runtime.config import Config  # the configuration imports LEVELS from here
    return Config({"system": {"logging": dict(settings)}}).typed.system.logging


def configure(settings: Logging | Mapping[str, Any], data_path: Path, max_bytes: int,
              rotate: bool = True) -> None:
    """Install the handlers described by ``[system.logging]`` on the root logger."""
    settings = typed(settings)
    formatter = (JsonFormatter() if settings.format == "json"
                 else logging.Formatter(TEXT_FORMAT))
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    path = log_file_path(settings, data_path)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(
            logging.handlers.RotatingFileHandler(path, maxBytes=max_bytes,
                                                 backupCount=settings.backups)
            if rotate else logging.handlers.WatchedFileHandler(path))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
        old.close()
    for handler in handlers:
        handler.setFormatter(formatter)
        root.addHandler(handler)
    root.setLevel(getattr(logging, settings.level.upper()))
