"""Helpers shared by the command modules: declaring leaf commands (with the global options
attached in long form), common positionals, and the "not found" check for get commands.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.identifier import Identifier
from lurcher.sdk.cli.errors import id_or_name, not_found
from lurcher.sdk.cli.options import add_global_options
from lurcher.sdk.cli.runtime import Run
from lurcher.sdk.cli.values import identifier_arg

T = TypeVar("T")
Handler = Callable[[Run], Awaitable[None]]
Sub = Any  # argparse._SubParsersAction
FORMATTER = argparse.RawDescriptionHelpFormatter


def leaf(sub: Sub, name: str, handler: Handler, help: str, *, aliases: tuple[str, ...] = (),
         description: str | None = None, client: bool = True,
         shorts: bool = False) -> argparse.ArgumentParser:
    """A command parser; ``client=False`` for commands that do not talk to the server;
    ``shorts`` accepts the short global options after the command too (``-u``, ``-p``...)."""
    parser = sub.add_parser(name, help=help, aliases=list(aliases), formatter_class=FORMATTER,
                            description=description or help)
    add_global_options(parser, top=False, shorts=shorts)
    parser.set_defaults(handler=handler, needs_client=client, rest_into=None,
                        command_name=parser.prog)
    return parser


def group(sub: Sub, name: str, help: str, aliases: tuple[str, ...] = ()) -> Sub:
    """A command group (``lurcher stream ...``); its actions are added to the result."""
    parser = sub.add_parser(name, help=help, aliases=list(aliases), description=help,
                            formatter_class=FORMATTER)
    actions = parser.add_subparsers(title="actions", dest="action", metavar="ACTION")
    actions.required = True
    return actions


def stream_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("stream", type=identifier_arg("stream"), help="stream id or name")


def topic_args(p: argparse.ArgumentParser) -> None:
    stream_arg(p)
    p.add_argument("topic", type=identifier_arg("topic"), help="topic id or name")


def ident(value: str) -> int | str:
    """Identifiers of ASCII digits within u32 are numeric ids, as in Iggy; anything else
    is a name (``Identifier.parse``)."""
    return Identifier.parse(value).value


def found(value: T | None, run: Run, by_id: ErrorCode, by_name: ErrorCode, field: str,
          what: str | None = None) -> T:
    """``value``, or raise the "not found" CliError for ``args.<field>`` (``what`` overrides
    the message)."""
    if value is None:
        code = id_or_name(getattr(run.args, field), by_id, by_name)
        raise not_found(code, run.args, what)
    return value
