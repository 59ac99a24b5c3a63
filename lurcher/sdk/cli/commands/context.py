"""``context create|use|list|delete|show`` (saved settings, no server needed) and
``login`` / ``logout`` (a personal access token kept in a context).

``context create NAME`` stores the global connection options given with it
(``--connection``, ``--address``, ``--transport``, ``--username``, ``--password``,
``--token``, ``--tls*``). ``login [EXPIRY]`` logs in with the given credentials, creates a
token named ``lurcher-cli-<unix time>-<6 random hex digits>`` (two logins in the same second
get different names) and stores it in the selected context (or a new
``default`` context, made active); later commands use the token. The context's previous
token is deleted on the server only once the new one is saved, and a new token that could
not be saved is deleted (none is left on the server, kept nowhere). ``logout`` deletes
that token on the server and from the context; a token the server no longer has (deleted
elsewhere, expired) is only removed from the context, while an unreachable server leaves
the context as it is.
"""

from __future__ import annotations

import contextlib
import secrets
import time

import msgspec

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.sdk.cli.commands.base import Sub, group, leaf
from lurcher.sdk.cli.contexts import Context, ContextStore
from lurcher.sdk.cli.errors import describe
from lurcher.sdk.cli.exitcodes import CliError, ExitCode
from lurcher.sdk.cli.options import DEFAULT_ADDRESS, selected_context
from lurcher.sdk.cli.runtime import Run
from lurcher.sdk.cli.values import expiry_us
from lurcher.sdk.client import Client
from lurcher.sdk.connstring import parse

DEFAULT_CONTEXT = "default"
# What the server answers for a token it no longer has (deleted elsewhere, or expired).
GONE_TOKEN_CODES = frozenset({ErrorCode.INVALID_PERSONAL_ACCESS_TOKEN,
                              ErrorCode.PERSONAL_ACCESS_TOKEN_EXPIRED,
                              ErrorCode.RESOURCE_NOT_FOUND})
CONTEXT_COLUMNS = ("ACTIVE", "NAME", "TRANSPORT", "ADDRESS", "USER", "AUTH")


def _summary(ctx: Context) -> dict[str, str]:
    """What a context connects to, without secrets."""
    info = {"transport": "tcp", "address": DEFAULT_ADDRESS, "user": "-", "auth": "none"}
    if ctx.connection:
        with contextlib.suppress(IggyError):
            cfg = parse(ctx.connection)
            info |= {"transport": cfg.transport, "address": cfg.address,
                     "user": cfg.username or "-", "auth": "token" if cfg.token else "password"}
    info |= {k: v for k, v in (("transport", ctx.transport), ("address", ctx.address),
                               ("user", ctx.username)) if v}
    if ctx.token:
        info["auth"] = "token" + (f" ({ctx.token_name})" if ctx.token_name else "")
    elif ctx.password:
        info["auth"] = "password"
    return info


async def create(run: Run) -> None:
    a = run.args
    if not a.name.strip():  # could never be chosen: an empty --context means none
        raise CliError("a context name cannot be empty or blank", ExitCode.USAGE)
    if a.connection:
        try:
            parse(a.connection)
        except IggyError as e:
            raise describe(e, a) from None
    ctx = Context(connection=a.connection, transport=a.transport, address=a.address,
                  username=a.username, password=a.password, token=a.token,
                  tls=a.tls or None, tls_domain=a.tls_domain, tls_ca_file=a.tls_ca_file)
    store = run.store
    if a.name in store.data.contexts and not a.force:
        raise CliError(f"context '{a.name}' already exists (use --force to replace it)",
                       ExitCode.CONFIG)
    store.put(a.name, ctx)
    if a.use:
        store.use(a.name)
    store.save()
    run.out.note(f"context '{a.name}' saved in {store.path}"
                 + (" and activated" if a.use else f"; activate it with "
                    f"'lurcher context use {a.name}'"), context=a.name)


async def use(run: Run) -> None:
    run.store.use(run.args.name)
    run.store.save()
    run.out.note(f"context '{run.args.name}' is now active", context=run.args.name)


async def delete(run: Run) -> None:
    run.store.delete(run.args.name)
    run.store.save()
    run.out.note(f"context '{run.args.name}' deleted", context=run.args.name)


async def list_(run: Run) -> None:
    store = run.store
    rows, records = [], []
    for name, ctx in sorted(store.data.contexts.items()):
        info = _summary(ctx)
        active = name == store.active
        rows.append(("*" if active else "", name, info["transport"], info["address"],
                     info["user"], info["auth"]))
        records.append({"name": name, "active": active, **info})
    run.out.table(CONTEXT_COLUMNS, rows, records)


async def show(run: Run) -> None:
    store = run.store
    name = run.args.name or store.active
    if name is None:
        raise CliError("no active context (lurcher context use NAME)", ExitCode.CONFIG)
    info = _summary(store.get(name))
    run.out.item([("name", name), ("active", name == store.active), *info.items()],
                 {"name": name, "active": name == store.active, **info})


async def login(run: Run) -> None:
    a = run.args
    config = run.config()
    if config.username is None or config.password is None:
        raise CliError("login needs a username and password (--username/--password or a "
                       "context/connection string with them)", ExitCode.USAGE)
    client = await run.client(config)
    name = a.name or default_token_name()
    token = await client.create_personal_access_token(name, a.expiry)
    store = run.store
    ctx_name, ctx = selected_context(a, store)
    if ctx_name is None:
        ctx_name = DEFAULT_CONTEXT
        ctx = Context(transport=config.transport, address=config.address,
                      username=config.username, tls=config.tls or None)
    store.put(ctx_name, msgspec.structs.replace(ctx, token=token, token_name=name))
    if store.active is None:
        store.use(ctx_name)
    await _save_or_forget(store, client, name)
    old = ctx.token_name
    if old and old != name:  # replaced only once the new one is saved
        with contextlib.suppress(IggyError):
            await client.delete_personal_access_token(old)
    run.out.note(f"logged in as '{config.username}'; token '{name}' stored in context "
                 f"'{ctx_name}'", context=ctx_name, token_name=name)


def default_token_name() -> str:
    """``lurcher-cli-<unix time>-<6 hex digits>``: 29 characters (a token name takes at
    most 30), unique among logins of the same second."""
    return f"lurcher-cli-{int(time.time())}-{secrets.token_hex(3)}"


async def _save_or_forget(store: ContextStore, client: Client, token_name: str) -> None:
    """Save ``store``; when that fails, delete the token just created on the server (kept
    nowhere, it could never be used or logged out of). Raises the save's CliError."""
    try:
        store.save()
    except BaseException:
        with contextlib.suppress(IggyError):
            await client.delete_personal_access_token(token_name)
        raise


async def logout(run: Run) -> None:
    store = run.store
    ctx_name, ctx = selected_context(run.args, store)
    if ctx_name is None or not ctx.token:
        raise CliError(f"not logged in: context '{ctx_name or '-'}' holds no token",
                       ExitCode.AUTHENTICATION)
    gone = await _delete_on_server(run, ctx.token_name)
    store.put(ctx_name, msgspec.structs.replace(ctx, token=None, token_name=None))
    store.save()
    was = " (it was no longer valid on the server)" if gone else ""
    run.out.note(f"logged out; token removed from context '{ctx_name}'{was}",
                 context=ctx_name)


async def _delete_on_server(run: Run, token_name: str | None) -> bool:
    """Delete the context's token on the server. True when the server no longer had it
    (deleted elsewhere, expired): logout then only forgets it, as there is nothing left to
    revoke. Raises CliError for anything else (the server unreachable: nothing is forgotten).
    """
    try:
        client = await run.client()
    except CliError as e:
        if e.code in GONE_TOKEN_CODES:
            return True
        raise
    if token_name:
        try:
            await client.delete_personal_access_token(token_name)
        except IggyError as e:
            if e.code not in GONE_TOKEN_CODES:
                raise
            return True
    return False


def register(sub: Sub) -> None:
    actions = group(sub, "context", "saved connection contexts", ("ctx",))
    p = leaf(actions, "create", create, "save a context from the connection options",
             aliases=("c",), client=False, shorts=True, description=(
                 "save a context from the connection options given with it\n\nexamples:\n"
                 "  lurcher context create prod --connection iggy://app:secret@10.0.0.1:8090\n"
                 "  lurcher context create local --address 127.0.0.1:8090 -u iggy -p iggy "
                 "--use"))
    p.add_argument("name")
    p.add_argument("--use", action="store_true", help="also make it the active context")
    p.add_argument("--force", action="store_true", help="replace an existing context")
    leaf(actions, "use", use, "make a context the active one", aliases=("u",),
         client=False).add_argument("name")
    leaf(actions, "list", list_, "list contexts", aliases=("l",), client=False)
    leaf(actions, "delete", delete, "delete a context", aliases=("d",),
         client=False).add_argument("name")
    leaf(actions, "show", show, "show a context (default: the active one)",
         client=False).add_argument("name", nargs="?")
    p = leaf(sub, "login", login, "log in and keep a personal access token in the context",
             aliases=("li",), shorts=True)
    p.add_argument("expiry", nargs="?", type=expiry_us, default=0,
                   help="token lifetime, e.g. 1day (default: the server's)")
    p.add_argument("--name", help="token name (default lurcher-cli-<unix time>-<random>)")
    leaf(sub, "logout", logout, "delete the context's token on the server and locally",
         aliases=("lo",), shorts=True)
