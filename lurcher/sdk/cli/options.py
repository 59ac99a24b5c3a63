"""Global options (connection, credentials, output) and how they become a ``ClientConfig``.

The same options are accepted before the command (``lurcher --json stream list``) and,
in long form (plus ``-o``/``-q``), after it (``lurcher stream list --json``): leaf parsers get
them with ``default=SUPPRESS`` so a value given in either place wins over the defaults set once
on the top parser.

Precedence, highest first: ``--connection`` / ``LURCHER_CONNECTION``; the context named by
``--context`` / ``LURCHER_CONTEXT`` or else the active context; individual flags
(``--address``, ``--transport``, ``--tls*``) override either. Credentials come as a
whole from the first place that has any: flags, then ``LURCHER_USERNAME`` /
``LURCHER_PASSWORD`` / ``LURCHER_TOKEN``, then the connection string or context (a
context's token wins over its password). The CLI's client has no heartbeat and few
reconnection retries unless the connection string sets them.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys

import msgspec

from lurcher.core.wire.errors import IggyError
from lurcher.sdk.cli.contexts import Context, ContextStore
from lurcher.sdk.cli.errors import describe
from lurcher.sdk.cli.exitcodes import CliError, ExitCode
from lurcher.sdk.cli.values import address_value, seconds_value
from lurcher.sdk.config import TRANSPORTS, ClientConfig
from lurcher.sdk.connstring import parse

DEFAULT_ADDRESS = "127.0.0.1:8090"
CLI_RECONNECTION_RETRIES = 2
CLI_RECONNECTION_INTERVAL_S = 0.5
OUTPUTS = ("text", "json")
LEAF_SHORT = ("-o", "-q")  # short global options that no command reuses
ENV = {"connection": "LURCHER_CONNECTION", "context": "LURCHER_CONTEXT",
       "username": "LURCHER_USERNAME", "password": "LURCHER_PASSWORD", "token": "LURCHER_TOKEN"}


def add_global_options(parser: argparse.ArgumentParser, top: bool, shorts: bool = False) -> None:
    """Connection/output options; ``top`` adds short forms and is the one with defaults;
    ``shorts`` gives a leaf every short form too (commands with no short options of
    their own)."""
    d = {} if top else {"default": argparse.SUPPRESS}

    def opt(short: str | None, *names: str, **kw: object) -> None:
        allowed = top or shorts or short in LEAF_SHORT
        flags = ([short] if short and allowed else []) + list(names)
        group.add_argument(*flags, **{**d, **kw})

    group = parser.add_argument_group("connection and output (global)")
    opt("-C", "--connection", metavar="URL",
        help="connection string, e.g. iggy://user:pass@host:8090 [env LURCHER_CONNECTION]")
    opt(None, "--context", metavar="NAME", help="use this saved context [env LURCHER_CONTEXT]")
    opt("-a", "--address", metavar="HOST:PORT", type=address_value,
        help=f"server address (default {DEFAULT_ADDRESS})")
    opt(None, "--transport", choices=TRANSPORTS, help="transport (default tcp)")
    opt("-u", "--username", help="username [env LURCHER_USERNAME]")
    opt("-p", "--password", help="password [env LURCHER_PASSWORD]; prompted on a terminal")
    opt("-t", "--token", help="personal access token [env LURCHER_TOKEN]")
    opt(None, "--tls", action="store_true", help="use TLS")
    opt(None, "--tls-ca-file", metavar="PATH", help="CA certificate file for TLS")
    opt(None, "--tls-domain", metavar="NAME", help="server name to verify with TLS")
    opt(None, "--timeout", type=seconds_value, metavar="SECONDS",
        help="connect/request timeout")
    opt("-o", "--output", choices=OUTPUTS, help="output format (default text)")
    opt(None, "--json", dest="output", action="store_const", const="json",
        help="same as --output json")
    opt("-q", "--quiet", action="store_true", help="print nothing on success")
    if top:
        parser.set_defaults(connection=None, context=None, address=None, transport=None,
                            username=None, password=None, token=None, tls=False,
                            tls_ca_file=None, tls_domain=None, timeout=None, output="text",
                            quiet=False)


def _env(name: str) -> str | None:
    return os.environ.get(ENV[name]) or None


def selected_context(args: argparse.Namespace, store: ContextStore) -> tuple[str | None, Context]:
    """The context to use (explicit, env, active) or an empty one. Raises CliError(CONFIG)."""
    name = args.context or _env("context") or store.active
    return name, (store.get(name) if name else Context())


def _connection_string(args: argparse.Namespace) -> str | None:
    """``--connection``, else ``LURCHER_CONNECTION``."""
    return args.connection or _env("connection")


def _base_config(args: argparse.Namespace, context: Context) -> ClientConfig:
    text = _connection_string(args)
    if text is None and context.connection:
        text = context.connection
    if text is None:
        return ClientConfig(address=DEFAULT_ADDRESS, heartbeat_interval_s=None,
                            reconnection_retries=CLI_RECONNECTION_RETRIES,
                            reconnection_interval_s=CLI_RECONNECTION_INTERVAL_S)
    try:
        config = parse(text)
    except IggyError as e:
        raise describe(e, args) from None
    if "reconnection" not in text:
        config = msgspec.structs.replace(config, reconnection_retries=CLI_RECONNECTION_RETRIES,
                                         reconnection_interval_s=CLI_RECONNECTION_INTERVAL_S)
    return msgspec.structs.replace(config, heartbeat_interval_s=None)


def _credentials(args: argparse.Namespace, context: Context,
                 config: ClientConfig) -> dict[str, str | None]:
    for source in (
        {"username": args.username, "password": args.password, "token": args.token},
        {"username": _env("username"), "password": _env("password"), "token": _env("token")},
    ):
        if any(source.values()):
            return source
    if _connection_string(args) or not (context.token or context.username):
        return {"username": config.username, "password": config.password, "token": config.token}
    if context.token:
        return {"username": None, "password": None, "token": context.token}
    return {"username": context.username, "password": context.password, "token": None}


def _prompt_password(creds: dict[str, str | None]) -> None:
    if creds["username"] and not creds["password"] and not creds["token"] and sys.stdin.isatty():
        creds["password"] = getpass.getpass(f"password for {creds['username']}: ")


def client_config(args: argparse.Namespace, store: ContextStore) -> ClientConfig:
    """The ClientConfig for this invocation; also sets ``args.login_user`` and
    ``args.login_address`` for error messages. Raises CliError."""
    _, context = selected_context(args, store)
    config = _base_config(args, context)
    creds = _credentials(args, context, config)
    _prompt_password(creds)
    if _connection_string(args):  # it outranks the context: only flags override it
        context = msgspec.structs.replace(context, transport=None, address=None, tls=None)
    fields = {
        "transport": args.transport or context.transport,
        "address": args.address or context.address,
        "tls": args.tls or context.tls or None,
        "tls_ca_file": args.tls_ca_file or context.tls_ca_file,
        "tls_domain": args.tls_domain or context.tls_domain,
    }
    if args.timeout:
        fields |= {"connect_timeout_s": args.timeout, "request_timeout_s": args.timeout}
    overrides = {k: v for k, v in fields.items() if v is not None}
    config = msgspec.structs.replace(config, **overrides, **creds)
    args.login_user = config.username or ("<token>" if config.token else "<none>")
    args.login_address = config.address
    if config.transport not in TRANSPORTS:
        raise CliError(f"unknown transport '{config.transport}'", ExitCode.INPUT)
    return config
