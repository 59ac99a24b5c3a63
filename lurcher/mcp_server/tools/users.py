"""User, permission and personal-access-token tools. Passwords are never echoed back."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from lurcher.core.wire.values.permissions import Permissions
from lurcher.mcp_server.gate import Access
from lurcher.mcp_server.render import plain
from lurcher.mcp_server.tools.base import (
    Args,
    Context,
    Expiry,
    Name,
    UserId,
    WireText,
    expiry_us,
    ok,
    register,
)

Password = Annotated[WireText, msgspec.Meta(description="At most 255 bytes as UTF-8.")]
PermissionsArg = Annotated[Permissions | None, msgspec.Meta(description=(
    "Permissions: {\"global\": {flag: bool}, \"streams\": {\"<stream id>\": {flag: bool, "
    "\"topics\": {\"<topic id>\": {flag: bool}}}}}; flags left out are false. Global flags: "
    "manage_servers, read_servers, manage_users, read_users, manage_streams, read_streams, "
    "manage_topics, read_topics, poll_messages, send_messages."))]


class UserArgs(Args):
    user_id: UserId


class CreateUserArgs(Args):
    username: Annotated[Name, msgspec.Meta(description="Unique user name.")]
    password: Password
    active: Annotated[bool, msgspec.Meta(description="Whether the user may log in.")] = True
    permissions: PermissionsArg = None


class UpdateUserArgs(Args):
    user_id: UserId
    username: Annotated[Name | None, msgspec.Meta(description="New user name.")] = None
    active: Annotated[bool | None, msgspec.Meta(description="Enable or disable "
                                                            "login.")] = None


class UpdatePermissionsArgs(Args):
    user_id: UserId
    permissions: PermissionsArg = None


class ChangePasswordArgs(Args):
    user_id: UserId
    current_password: Password
    new_password: Password


class CreateTokenArgs(Args):
    name: Annotated[Name, msgspec.Meta(description="Token name (unique per user).")]
    expiry: Expiry = None


class TokenArgs(Args):
    name: Annotated[Name, msgspec.Meta(description="Token name.")]


def _status(active: bool | None) -> str | None:
    return None if active is None else ("active" if active else "inactive")


@register("get_users", Access.READ, "List every user: id, name, status, creation time.", Args)
async def get_users(ctx: Context, a: Args) -> dict[str, Any]:
    users = plain(await ctx.client.get_users())
    return {"count": len(users), "users": users}


@register("get_user", Access.READ, "One user with its permissions.", UserArgs)
async def get_user(ctx: Context, a: UserArgs) -> dict[str, Any]:
    found = await ctx.client.get_user(a.user_id)
    return plain(found) if found else {"found": False, "user_id": a.user_id}


@register("create_user", Access.CREATE,
          "Create a user with a password, a status and optional permissions.", CreateUserArgs)
async def create_user(ctx: Context, a: CreateUserArgs) -> dict[str, Any]:
    return plain(await ctx.client.create_user(
        a.username, a.password, _status(a.active) or "active", a.permissions))


@register("update_user", Access.UPDATE, "Rename a user or change whether it is active.",
          UpdateUserArgs)
async def update_user(ctx: Context, a: UpdateUserArgs) -> dict[str, Any]:
    await ctx.client.update_user(a.user_id, a.username, _status(a.active))
    return ok("update_user", user_id=a.user_id, username=a.username, active=a.active)


@register("delete_user", Access.DELETE, "Delete a user.", UserArgs)
async def delete_user(ctx: Context, a: UserArgs) -> dict[str, Any]:
    await ctx.client.delete_user(a.user_id)
    return ok("delete_user", user_id=a.user_id)


@register("update_permissions", Access.UPDATE,
          "Replace a user's permissions (left out: no permissions at all).",
          UpdatePermissionsArgs)
async def update_permissions(ctx: Context, a: UpdatePermissionsArgs) -> dict[str, Any]:
    await ctx.client.update_permissions(a.user_id, a.permissions)
    return ok("update_permissions", user_id=a.user_id)


@register("change_password", Access.UPDATE, "Change a user's password.", ChangePasswordArgs)
async def change_password(ctx: Context, a: ChangePasswordArgs) -> dict[str, Any]:
    await ctx.client.change_password(a.user_id, a.current_password, a.new_password)
    return ok("change_password", user_id=a.user_id)


@register("get_personal_access_tokens", Access.READ,
          "List the personal access tokens of the user this MCP server logs in as (names and "
          "expiry times, never the secrets).", Args)
async def get_personal_access_tokens(ctx: Context, a: Args) -> dict[str, Any]:
    tokens = plain(await ctx.client.get_personal_access_tokens())
    return {"count": len(tokens), "personal_access_tokens": tokens}


@register("create_personal_access_token", Access.CREATE,
          "Create a personal access token for the user this MCP server logs in as. The secret "
          "is returned once.", CreateTokenArgs)
async def create_personal_access_token(ctx: Context, a: CreateTokenArgs) -> dict[str, Any]:
    token = await ctx.client.create_personal_access_token(a.name, expiry_us(a.expiry))
    return {"name": a.name, "token": token}


@register("delete_personal_access_token", Access.DELETE,
          "Delete a personal access token by name.", TokenArgs)
async def delete_personal_access_token(ctx: Context, a: TokenArgs) -> dict[str, Any]:
    await ctx.client.delete_personal_access_token(a.name)
    return ok("delete_personal_access_token", name=a.name)
