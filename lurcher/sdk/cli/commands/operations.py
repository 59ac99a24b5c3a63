"""``snapshot``, ``cluster metadata`` / ``cluster status`` (``commands.cluster``) and
``completion`` (a bash/zsh completion script built from the command tree, so it never lags
behind the commands)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from lurcher.core.wire.requests.system.get_snapshot_file import SNAPSHOT_TYPES
from lurcher.sdk.api.system import SNAPSHOT_ALL
from lurcher.sdk.cli.commands.base import Sub, group, leaf
from lurcher.sdk.cli.commands.cluster import cluster_status
from lurcher.sdk.cli.exitcodes import CliError, ExitCode
from lurcher.sdk.cli.output import printable
from lurcher.sdk.cli.runtime import Run

COMPRESSIONS = {"stored": 1, "deflated": 2}
SNAPSHOT_NAMES = {name: code for code, name in SNAPSHOT_TYPES.items()}


async def snapshot(run: Run) -> None:
    a = run.args
    types = [SNAPSHOT_NAMES[t] for t in a.type] if a.type else [SNAPSHOT_ALL]
    data = await (await run.client()).get_snapshot(COMPRESSIONS[a.compression], types)
    try:
        Path(a.output_file).write_bytes(data)
    except OSError as e:
        raise CliError(f"cannot write {a.output_file}: {e.strerror}", ExitCode.USAGE) from None
    run.out.note(f"snapshot written to {a.output_file} ({len(data)} bytes)",
                 path=a.output_file, bytes=len(data))


async def cluster_metadata(run: Run) -> None:
    meta = await (await run.client()).get_cluster_metadata()
    rows = [(n.name, n.ip, n.tcp_port, n.quic_port, n.http_port, n.websocket_port, n.role,
             n.status) for n in meta.nodes]
    if not run.out.json:
        run.out.write(f"cluster {printable(meta.name)}")
    run.out.table(("name", "ip", "tcp", "quic", "http", "websocket", "role", "status"), rows,
                  meta)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    return sorted(f for action in parser._actions for f in action.option_strings)


def bash_script(parser: argparse.ArgumentParser, prog: str = "lurcher") -> str:
    """A bash completion function for ``prog``: commands, actions, then each leaf's flags."""
    commands = _subcommands(parser)
    second, third = [], []
    for name, sub in commands.items():
        actions = _subcommands(sub)
        words = list(actions) if actions else _flags(sub)
        second.append(f"      {shlex.quote(name)}) opts={shlex.quote(' '.join(words))};;")
        for action, leaf_parser in actions.items():
            third.append(f"      {shlex.quote(name + ' ' + action)}) "
                         f"opts={shlex.quote(' '.join(_flags(leaf_parser)))};;")
    top = " ".join([*commands, *_flags(parser)])
    return "\n".join([
        f"_{prog}() {{",
        '  local cur="${COMP_WORDS[COMP_CWORD]}" opts=""',
        "  if [ \"$COMP_CWORD\" -eq 1 ]; then",
        f"    opts={shlex.quote(top)}",
        "  elif [ \"$COMP_CWORD\" -eq 2 ]; then",
        '    case "${COMP_WORDS[1]}" in',
        *second,
        "    esac",
        "  else",
        '    case "${COMP_WORDS[1]} ${COMP_WORDS[2]}" in',
        *third,
        "    esac",
        "  fi",
        '  COMPREPLY=($(compgen -W "$opts" -- "$cur"))',
        "}",
        f"complete -o default -F _{prog} {prog}",
    ])


async def completion(run: Run) -> None:
    from lurcher.sdk.cli.main import build_parser
    script = bash_script(build_parser())
    if run.args.shell == "zsh":
        script = "autoload -U +X bashcompinit && bashcompinit\n" + script
    run.out.write(script)


def register(sub: Sub) -> None:
    p = leaf(sub, "snapshot", snapshot, "download the server's diagnostic snapshot (a ZIP file)")
    p.add_argument("--output-file", default="snapshot.zip", metavar="PATH",
                   help="where to write it (default snapshot.zip)")
    p.add_argument("-c", "--compression", choices=sorted(COMPRESSIONS), default="deflated")
    p.add_argument("-t", "--type", action="append", choices=sorted(SNAPSHOT_NAMES),
                   help="what to include (repeatable; default all)")
    actions = group(sub, "cluster", "cluster information")
    leaf(actions, "metadata", cluster_metadata, "the cluster's name and nodes")
    leaf(actions, "status", cluster_status,
         "nodes, roles and each replication group's view, primary, commit and lag")
    p = leaf(sub, "completion", completion, "print a shell completion script", client=False,
             description="print a shell completion script\n\nexamples:\n"
                         "  source <(lurcher completion bash)\n"
                         "  lurcher completion zsh > ~/.zfunc/_lurcher")
    p.add_argument("shell", choices=("bash", "zsh"))
