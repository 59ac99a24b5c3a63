"""The server's logging set-up from ``[system.logging]``: level, text or JSON lines, and an
optional log file with size-based rotation (in addition to stderr).

Invariants: one handler set per process, installed once (``configure`` replaces what was
there). With several shard processes only the process given ``rotate=True`` (the
supervisor, or the single server process) rotates the file; shard processes append through
a ``WatchedFileHandler``, which reopens the file after the supervisor rotated it. Log
lines never carry secrets: callers log user names, never passwords or tokens.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import sys
import time
from pathlib import Path
from typing import Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
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


def log_file_path(settings: dict[str, Any], data_path: Path) -> Path | None:
    """``system.logging.file`` as an absolute path (relative ones are under ``data_path``)."""
    name = settings.get("file") or ""
    return data_path / name if name else None


def configure(settings: dict[str, Any], data_path: Path, max_bytes: int,
              rotate: bool = True) -> None:
    """Install the handlers described by ``[system.logging]`` on the root logger."""
    formatter = (JsonFormatter() if settings.get("format") == "json"
                 else logging.Formatter(TEXT_FORMAT))
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    path = log_file_path(settings, data_path)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(
            logging.handlers.RotatingFileHandler(path, maxBytes=max_bytes,
                                                 backupCount=int(settings.get("backups", 5)))
            if rotate else logging.handlers.WatchedFileHandler(path))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
        old.close()
    for handler in handlers:
        handler.setFormatter(formatter)
        root.addHandler(handler)
    root.setLevel(getattr(logging, str(settings.get("level", "info")).upper(), logging.INFO))
