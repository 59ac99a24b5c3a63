"""The permission gate: which kinds of call this MCP server forwards at all.

Every tool and resource declares one ``Access`` (create, read, update, delete); ``Gate.check``
runs before anything is sent to the server, so a refused call never reaches lurcher. The gate
narrows what the configured lurcher user may do; it never widens it (lurcher still checks the
user's own permissions on every command it receives).
"""

from __future__ import annotations

import enum

from lurcher.mcp_server.config import PermissionsConfig


class Access(enum.StrEnum):
    CREATE = "create"
    READ = "read"
    UPDATE = "update"
    DELETE = "delete"


class GateRefused(Exception):
    """A call the gate does not allow; nothing was sent to the server."""

    def __init__(self, access: Access, what: str) -> None:
        self.access = access
        super().__init__(
            f"refused by the MCP server: '{access}' operations are disabled in its "
            f"[permissions] configuration, so {what} was not sent to lurcher")


class Gate:
    def __init__(self, permissions: PermissionsConfig) -> None:
        self.allowed = frozenset(a for a in Access if getattr(permissions, a.value))

    def check(self, access: Access, what: str) -> None:
        """Raises GateRefused when ``access`` is disabled."""
        if access not in self.allowed:
            raise GateRefused(access, what)
