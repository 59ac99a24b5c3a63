"""``user ...``, ``permissions get|set``, ``pat create|list|delete``, ``client get|list``.

Permissions come from a JSON file (``--file``, the same shape ``permissions get --json``
prints: ``{"global": {...flags}, "streams": {"1": {...flags, "topics": {"2": {...}}}}}``)
or from the Iggy-style flags ``-g`` (global) and ``-s`` (per stream, repeatable);
``--clear`` removes every permission.
"""

from __future__ import annotations

import argparse
import getpass
import sys

import msgspec

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.values.permissions import Permissions
from lurcher.sdk.cli.commands.base import Sub, found, group, ident, leaf
from lurcher.sdk.cli.exitcodes import CliError, ExitCode
from lurcher.sdk.cli.files import read_small_file
from lurcher.sdk.cli.output import TRANSPORT_NAMES, USER_STATUS_NAMES, human_time, iso_time
from lurcher.sdk.cli.runtime import Run
from lurcher.sdk.cli.values import (expiry_us, global_permissions, identifier_arg,
                                    non_negative_int, stream_permissions)

E = ErrorCode
USER_COLUMNS = ("ID", "USERNAME", "STATUS", "CREATED")
STATUSES = ("active", "inactive")
NO_USER = 0xFFFF_FFFF


def _user_row(h) -> tuple:
    return (h.id, h.username, USER_STATUS_NAMES.get(h.status, h.status), human_time(h.created_at))


def _true_flags(flags) -> str:
    names = [f for f in flags.__struct_fields__ if f != "topics" and getattr(flags, f)]
    return ",".join(names) or "-"


def permission_lines(p: Permissions | None) -> list[tuple[str, str]]:
    if p is None:
        return [("permissions", "none")]
    lines = [("global", _true_flags(p.global_))]
    for sid, s in sorted(p.streams.items()):
        lines.append((f"stream {sid}", _true_flags(s)))
        lines += [(f"stream {sid} topic {tid}", _true_flags(t))
                  for tid, t in sorted(s.topics.items())]
    return lines


def permissions_from(a: argparse.Namespace) -> Permissions | None:
    """The permissions the flags or ``--file`` describe; None for none. Raises CliError."""
    if a.permissions_file:
        raw = read_small_file(a.permissions_file, ExitCode.INPUT)
        try:
            return msgspec.json.decode(raw, type=Permissions)
        except msgspec.DecodeError as e:
            raise CliError(f"invalid permissions in {a.permissions_file}: {e}",
                           ExitCode.INPUT) from None
    if a.global_permissions is None and not a.stream_permissions:
        return None
    return Permissions(a.global_permissions or Permissions().global_,
                       dict(a.stream_permissions or []))


def _permission_flags(p: argparse.ArgumentParser, clear: bool) -> None:
    p.add_argument("-g", "--global-permissions", type=global_permissions, metavar="PERMS",
                   help="global permissions, e.g. m_str,r_str,p_msg,s_msg (or long names)")
    p.add_argument("-s", "--stream-permissions", type=stream_permissions, action="append",
                   metavar="SPEC", help="per stream: STREAM_ID[:perms][#TOPIC_ID:perms]..., "
                   "e.g. 3:r_str#1:s_msg,p_msg (repeatable)")
    p.add_argument("--file", dest="permissions_file", metavar="JSON",
                   help="read the permissions from a JSON file")
    if clear:
        p.add_argument("--clear", action="store_true", help="remove every permission")


async def create_user(run: Run) -> None:
    a = run.args
    user = await (await run.client()).create_user(a.new_user, a.user_password, a.user_status,
                                                  permissions_from(a))
    run.out.note(f"user '{a.new_user}' created with id {user.header.id}", user=user.header)


async def get_user(run: Run) -> None:
    user = found(await (await run.client()).get_user(ident(run.args.user)), run,
                 E.RESOURCE_NOT_FOUND, E.RESOURCE_NOT_FOUND, "user",
                 f"user '{run.args.user}' not found")
    run.out.item(list(zip(USER_COLUMNS, _user_row(user.header)))
                 + permission_lines(user.permissions), user)


async def list_users(run: Run) -> None:
    users = await (await run.client()).get_users()
    run.out.table(USER_COLUMNS, [_user_row(u) for u in users], users)


async def update_user(run: Run) -> None:
    a = run.args
    if a.new_username is None and a.status is None:
        raise CliError("nothing to update: give a new username and/or --status", ExitCode.USAGE)
    await (await run.client()).update_user(ident(a.user), a.new_username, a.status)
    run.out.note(f"user '{a.user}' updated")


async def delete_user(run: Run) -> None:
    await (await run.client()).delete_user(ident(run.args.user))
    run.out.note(f"user '{run.args.user}' deleted")


def _ask(prompt: str) -> str:
    if not sys.stdin.isatty():
        raise CliError("passwords missing: give CURRENT and NEW (no terminal to ask on)",
                       ExitCode.USAGE)
    return getpass.getpass(prompt)


async def change_password(run: Run) -> None:
    a = run.args
    current = a.current_password or _ask("current password: ")
    new = a.new_password or _ask("new password: ")
    client = await run.client()
    try:
        await client.change_password(ident(a.user), current, new)
    except IggyError as e:
        if e.code != ErrorCode.INVALID_CREDENTIALS:
            raise
        raise CliError(f"the current password given for user '{a.user}' is wrong",
                       ExitCode.CREDENTIALS, e.code) from None
    run.out.note(f"password of user '{a.user}' changed")


async def get_permissions(run: Run) -> None:
    user = found(await (await run.client()).get_user(ident(run.args.user)), run,
                 E.RESOURCE_NOT_FOUND, E.RESOURCE_NOT_FOUND, "user",
                 f"user '{run.args.user}' not found")
    if run.out.json:
        run.out.dump(user.permissions)
        return
    run.out.item(permission_lines(user.permissions))


async def set_permissions(run: Run) -> None:
    a = run.args
    permissions = permissions_from(a)
    if permissions is None and not a.clear:
        raise CliError("no permissions given: use --file, -g, -s, or --clear", ExitCode.USAGE)
    await (await run.client()).update_permissions(ident(a.user), permissions)
    run.out.note(f"permissions of user '{a.user}' updated")


async def create_pat(run: Run) -> None:
    a = run.args
    token = await (await run.client()).create_personal_access_token(a.name, a.expiry)
    if run.out.json:
        run.out.dump({"name": a.name, "token": token})
    elif a.quiet:
        run.out.write(token)
    else:
        run.out.write(f"personal access token '{a.name}' created (shown once):\n{token}")


async def list_pats(run: Run) -> None:
    pats = await (await run.client()).get_personal_access_tokens()
    run.out.table(("NAME", "EXPIRES"), [
        (p.name, iso_time(p.expiry_at) if p.expiry_at else "never") for p in pats], pats)


async def delete_pat(run: Run) -> None:
    await (await run.client()).delete_personal_access_token(run.args.name)
    run.out.note(f"personal access token '{run.args.name}' deleted")


def _client_row(h) -> tuple:
    return (h.client_id, "-" if h.user_id == NO_USER else h.user_id,
            TRANSPORT_NAMES.get(h.transport, h.transport), h.address, h.consumer_groups_count)


CLIENT_COLUMNS = ("ID", "USER ID", "TRANSPORT", "ADDRESS", "GROUPS")


async def get_client(run: Run) -> None:
    details = await (await run.client()).get_client(run.args.client_id)
    if details is None:
        raise CliError(f"client {run.args.client_id} not found", ExitCode.NOT_FOUND,
                       E.CLIENT_NOT_FOUND)
    run.out.item(list(zip(CLIENT_COLUMNS, _client_row(details.header))) + [
        (f"group {i + 1}", f"stream {g.stream_id} topic {g.topic_id} group {g.group_id}")
        for i, g in enumerate(details.consumer_groups)], details)


async def list_clients(run: Run) -> None:
    clients = await (await run.client()).get_clients()
    run.out.table(CLIENT_COLUMNS, [_client_row(c) for c in clients], clients)


def _user_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("user", type=identifier_arg("user"), help="user id or name")


def _register_users(sub: Sub) -> None:
    actions = group(sub, "user", "user operations", ("u",))
    p = leaf(actions, "create", create_user, "create a user", aliases=("c",))
    p.add_argument("new_user", metavar="USERNAME")
    p.add_argument("user_password", metavar="PASSWORD")
    p.add_argument("--user-status", "--status", choices=STATUSES, default="active")
    _permission_flags(p, clear=False)
    _user_arg(leaf(actions, "get", get_user, "show a user and its permissions", aliases=("g",)))
    leaf(actions, "list", list_users, "list users", aliases=("l",))
    p = leaf(actions, "update", update_user, "rename a user or change its status",
             aliases=("n", "name"))
    _user_arg(p)
    p.add_argument("new_username", nargs="?", help="new username")
    p.add_argument("--status", choices=STATUSES)
    _user_arg(leaf(actions, "delete", delete_user, "delete a user", aliases=("d",)))
    p = leaf(actions, "password", change_password, "change a user's password",
             aliases=("pwd",))
    _user_arg(p)
    p.add_argument("current_password", nargs="?", help="prompted when missing")
    p.add_argument("new_password", nargs="?", help="prompted when missing")
    p = leaf(actions, "permissions", set_permissions, "set a user's permissions",
             aliases=("p",))
    _user_arg(p)
    _permission_flags(p, clear=True)


def register(sub: Sub) -> None:
    _register_users(sub)
    actions = group(sub, "permissions", "user permissions", ("perm",))
    _user_arg(leaf(actions, "get", get_permissions, "show a user's permissions",
                   aliases=("g",)))
    p = leaf(actions, "set", set_permissions, "replace a user's permissions",
             aliases=("s",), description="replace a user's permissions\n\nexamples:\n"
             "  lurcher permissions set alice --file perms.json\n"
             "  lurcher permissions set alice -g r_str,r_top -s 1:p_msg#2:s_msg")
    _user_arg(p)
    _permission_flags(p, clear=True)
    actions = group(sub, "pat", "personal access token operations")
    p = leaf(actions, "create", create_pat, "create a token (printed once)", aliases=("c",))
    p.add_argument("name")
    p.add_argument("expiry", nargs="?", type=expiry_us, default=0,
                   help="lifetime, e.g. 1day (default: the server's)")
    leaf(actions, "list", list_pats, "list your tokens", aliases=("l",))
    leaf(actions, "delete", delete_pat, "delete a token", aliases=("d",)).add_argument("name")
    actions = group(sub, "client", "connected clients", ("c",))
    leaf(actions, "get", get_client, "show one client", aliases=("g",)).add_argument(
        "client_id", type=non_negative_int, help="client id")
    leaf(actions, "list", list_clients, "list connected clients", aliases=("l",))
