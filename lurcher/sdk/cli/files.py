"""Reading the CLI's own small local files (the contexts file, a permissions file).

Invariant: at most ``SMALL_FILE_LIMIT + 1`` bytes are ever read from one: a larger file, or
a device that never ends (``/dev/zero``), is refused with one line instead of being read
into memory whole. Failures are CliErrors with the caller's exit code.
"""

from __future__ import annotations

import os

from lurcher.sdk.cli.exitcodes import CliError, ExitCode

SMALL_FILE_LIMIT = 16 * 1024 * 1024  # far above any contexts or permissions file


def read_small_file(path: str | os.PathLike[str], exit_code: ExitCode, *,
                    missing_ok: bool = False, limit: int = SMALL_FILE_LIMIT) -> bytes | None:
    """The file's bytes; None for a missing file when ``missing_ok``. Raises CliError
    (``exit_code``) when it cannot be read or holds more than ``limit`` bytes."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError as e:
        if missing_ok:
            return None
        raise _unreadable(path, e, exit_code) from None
    except OSError as e:
        raise _unreadable(path, e, exit_code) from None
    if len(data) > limit:
        raise CliError(f"cannot read {path}: more than {limit} bytes", exit_code)
    return data


def _unreadable(path: str | os.PathLike[str], e: OSError, exit_code: ExitCode) -> CliError:
    return CliError(f"cannot read {path}: {e.strerror or e}", exit_code)
