"""``lurcher``: the command-line client, built on ``lurcher.sdk.Client``.

``main(argv) -> exit code``: parse (argparse; usage errors exit 2), run the handler on a
fresh event loop, print failures as ``error: <what> (<IggyName>, <code>)`` on stderr and
map them to ``ExitCode``. Handlers never call ``sys.exit``. An output that cannot be written
(a full disk) is one line and exit 8 too; a reader that went away (``| head``) is exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import sys
from collections.abc import Sequence

from lurcher.core.wire.errors import IggyError
from lurcher.sdk.cli.commands import MODULES
from lurcher.sdk.cli.errors import describe
from lurcher.sdk.cli.exitcodes import CliError, ExitCode, exit_codes_help
from lurcher.sdk.cli.options import add_global_options
from lurcher.sdk.cli.output import Output
from lurcher.sdk.cli.runtime import Run

PROG = "lurcher"
DESCRIPTION = "Command-line client for lurcher and Apache Iggy 0.8 servers."
EXAMPLES = """\
examples:
  lurcher context create local --connection iggy://iggy:iggy@127.0.0.1:8090 --use
  lurcher stream create orders
  lurcher topic create orders eu 3 none 7days --max-topic-size 10GB
  echo hello | lurcher message send orders eu
  lurcher message poll orders eu 0 --first --count 10 --format json
  lurcher --json stream list
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description=DESCRIPTION, epilog=EXAMPLES + "\n" + exit_codes_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_global_options(parser, top=True)
    sub = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND")
    sub.required = True
    for module in MODULES:
        module.register(sub)
    return parser


async def _run(run: Run) -> None:
    try:
        await run.args.handler(run)
    finally:
        await run.close()


def _execute(run: Run) -> int:
    try:
        asyncio.run(_run(run))
    except CliError as e:
        print(e.render(), file=sys.stderr)
        return e.exit_code
    except IggyError as e:
        print(describe(e, run.args).render(), file=sys.stderr)
        return describe(e, run.args).exit_code
    except (ValueError, OverflowError, struct.error) as e:
        # a value the argument checks let through, refused where it is used or encoded
        print(f"error: invalid argument: {_one_line(str(e))}", file=sys.stderr)
        return ExitCode.USAGE
    except BrokenPipeError:
        raise  # the reader went away: ``main`` ends quietly
    except OSError as e:
        # every local file is opened and read under a CliError of its own: what is left is
        # writing the output (stdout or --output-file) on a full disk or a failing device
        print(f"error: cannot write the output: {e.strerror or e}", file=sys.stderr)
        return ExitCode.INPUT
    except (TimeoutError, asyncio.TimeoutError):
        print(f"error: timed out talking to {getattr(run.args, 'login_address', 'the server')}",
              file=sys.stderr)
        return ExitCode.CONNECTION
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    return ExitCode.OK


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit] + "..."


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse; positionals given after options (``send s t --id 1 a b``) are appended to the
    command's ``rest_into`` list when it has one. Exits 2 on usage errors."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    into = getattr(args, "rest_into", None)
    if extra and into and not any(e.startswith("-") and e != "-" for e in extra):
        getattr(args, into).extend(extra)
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (argparse exits 2 itself on usage errors)."""
    try:
        args = parse(argv)
    except CliError as e:  # an argument type's own one-line refusal
        print(e.render(), file=sys.stderr)
        return e.exit_code
    run = Run(args, Output(args.output, args.quiet))
    try:
        return int(_execute(run))
    except BrokenPipeError:
        # the reader went away (e.g. `| head`): not an error; silence the final flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.OK
