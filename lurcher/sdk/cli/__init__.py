"""The ``lurcher`` command-line client (``python -m lurcher.sdk.cli`` or the ``lurcher``
console script), built only on the public SDK (``lurcher.sdk.Client``).

Modules: ``main`` (parser, dispatch, error -> exit code), ``exitcodes`` (the exit code
table), ``errors`` (messages naming what failed), ``options`` (global options ->
``ClientConfig``), ``contexts`` (saved contexts file), ``output`` (tables / JSON),
``values`` (argument parsers), ``runtime`` (``Run``), ``commands/*`` (one module per area).
"""

from lurcher.sdk.cli.exitcodes import ExitCode
from lurcher.sdk.cli.main import build_parser, main

__all__ = ["ExitCode", "build_parser", "main"]
