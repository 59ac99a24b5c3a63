"""Saved login contexts: named connection settings so credentials are typed once.

File: ``$LURCHER_CLI_CONFIG``, else ``$XDG_CONFIG_HOME/lurcher/contexts.json``, else
``~/.config/lurcher/contexts.json``. JSON ``{"active": name|null, "contexts": {name:
Context}}``. Invariants: the file is written atomically (temp file + rename) with mode
0600 and its directory is created 0700, because it may hold passwords and tokens; a
missing file is an empty store. Every failure is a CliError with ExitCode.CONFIG.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import msgspec

from lurcher.sdk.cli.exitcodes import CliError, ExitCode
from lurcher.sdk.cli.files import read_small_file

CONFIG_ENV = "LURCHER_CLI_CONFIG"
FILE_NAME = "contexts.json"
FILE_MODE = 0o600
DIR_MODE = 0o700


class Context(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=False):
    """One saved context; every field optional. ``connection`` is a connection string;
    the other fields override it. ``token_name`` names the PAT created by ``login``."""

    connection: str | None = None
    transport: str | None = None
    address: str | None = None
    username: str | None = None
    password: str | None = None
    token: str | None = None
    token_name: str | None = None
    tls: bool | None = None
    tls_domain: str | None = None
    tls_ca_file: str | None = None


class ContextFile(msgspec.Struct, omit_defaults=True):
    active: str | None = None
    contexts: dict[str, Context] = {}


def config_path() -> Path:
    """Where the contexts file lives (see the module docstring)."""
    explicit = os.environ.get(CONFIG_ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "lurcher" / FILE_NAME


def _replace_atomically(path: Path, data: bytes) -> None:
    """``path`` now holds ``data`` (mode 0600), written to a temp file renamed over it; the
    temp file is removed when that fails. Raises OSError."""
    fd, tmp = tempfile.mkstemp(prefix=".contexts-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), FILE_MODE)
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class ContextStore:
    """Load, change and save the contexts file. Raises CliError(CONFIG)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or config_path()
        self.data = self._load()

    def _load(self) -> ContextFile:
        raw = read_small_file(self.path, ExitCode.CONFIG, missing_ok=True)
        if raw is None:
            return ContextFile()
        try:
            return msgspec.json.decode(raw, type=ContextFile)
        except msgspec.DecodeError as e:
            raise CliError(f"invalid contexts file {self.path}: {e}", ExitCode.CONFIG) from None

    def save(self) -> None:
        """Atomic write with mode 0600; a failed save leaves the old file and no temp file.
        Raises CliError(CONFIG), or ValueError for text that is not UTF-8 (a name or
        value given as undecodable bytes)."""
        data = msgspec.json.format(msgspec.json.encode(self.data), indent=2) + b"\n"
        try:
            self.path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            _replace_atomically(self.path, data)
        except OSError as e:
            raise CliError(f"cannot write {self.path}: {e.strerror}", ExitCode.CONFIG) from None

    def get(self, name: str) -> Context:
        try:
            return self.data.contexts[name]
        except KeyError:
            known = ", ".join(sorted(self.data.contexts)) or "none"
            raise CliError(f"context '{name}' not found (known: {known})",
                           ExitCode.CONFIG) from None

    def put(self, name: str, context: Context) -> None:
        self.data.contexts[name] = context

    def delete(self, name: str) -> None:
        self.get(name)
        del self.data.contexts[name]
        if self.data.active == name:
            self.data.active = None

    def use(self, name: str) -> None:
        self.get(name)
        self.data.active = name

    @property
    def active(self) -> str | None:
        return self.data.active
