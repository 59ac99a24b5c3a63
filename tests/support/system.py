"""Tests that need a program from the operating system fail with one line naming the Debian
package to install (``lurcher.devtools.system_deps`` is the registry), never with a traceback
from deep inside the test. Use ``@pytest.mark.system("java")`` or call ``require_system``."""

from __future__ import annotations

import pytest

from lurcher.devtools.system_deps import missing_message


def require_system(*names: str) -> None:
    """Fail the calling test (one line, no traceback) when a named program is absent."""
    lines = [m for m in map(missing_message, names) if m]
    if lines:
        pytest.fail("; ".join(lines), pytrace=False)
