"""Optional parts installed as extras, and the commands that need them.

``lurcher-bench`` and ``lurcher-mcp`` start through ``run_with_extra``: when a module of
their extra is missing (a base install) they print one line naming the extra to install
and exit 1, instead of a ModuleNotFoundError traceback. ``EXTRA_MODULES`` lists the
top-level modules each extra of pyproject.toml provides.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable

EXTRA_MODULES: dict[str, frozenset[str]] = {
    "bench": frozenset({"matplotlib", "nats", "redis", "hiredis", "tqdm"}),
    "mcp": frozenset({"mcp", "mcp_types"}),
    "spark": frozenset({"pyspark", "pyarrow", "pandas"}),
    "uring": frozenset({"liburing"}),
}


def extra_for(exc: ModuleNotFoundError) -> str | None:
    """The extra whose module is missing, or None when it belongs to none."""
    root = (exc.name or "").split(".")[0]
    return next((extra for extra, modules in EXTRA_MODULES.items() if root in modules), None)


def missing_extra_message(prog: str, exc: ModuleNotFoundError) -> str | None:
    extra = extra_for(exc)
    if extra is None:
        return None
    return (f"{prog}: the {exc.name!r} module is missing; install the {extra} extra: "
            f"pip install 'lurcher[{extra}]'")


def run_with_extra(prog: str, target: str, argv: list[str] | None = None) -> int:
    """Import ``module:function`` and run it; a missing extra module is one line, exit 1."""
    module_name, _, function = target.partition(":")
    try:
        main: Callable[..., int] = getattr(importlib.import_module(module_name), function)
        return main(argv)
    except ModuleNotFoundError as exc:
        message = missing_extra_message(prog, exc)
        if message is None:
            raise
        print(message, file=sys.stderr)
        return 1


def bench() -> int:
    return run_with_extra("lurcher-bench", "lurcher.bench.cli:main")


def mcp() -> int:
    return run_with_extra("lurcher-mcp", "lurcher.mcp_server.cli:main")
