"""Turning an ``IggyError`` into a ``CliError`` whose message names what was not found,
already exists, or failed, using the command's own arguments.

The server only answers a status number, so the message comes from ``TEMPLATES``
(status -> text with ``{field}`` placeholders filled from the parsed arguments); a
template whose fields the command does not have falls back to the status's reason.
``not_found`` builds the same error for "get" commands, which the server answers with an
empty OK instead of a status. A command the transport cannot carry (``NotOverTransport``)
is named with the transport it lacks, and the others to use. ``describe_login`` is
``describe`` for the failure of the connect-and-login every command starts with: there a
username or password the server refuses for its form means the login was refused
(CREDENTIALS), as a wrong one does, and a connection option the transport refuses is bad
input (INPUT) named with its reason.
"""

from __future__ import annotations

import argparse
import string
from typing import Any

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.validation import PASSWORD_BYTES, USERNAME_BYTES
from lurcher.sdk.arguments import InvalidArgument
from lurcher.sdk.cli.exitcodes import CliError, ExitCode, exit_code_for
from lurcher.sdk.config import TRANSPORTS
from lurcher.sdk.connection.base import NotOverTransport

E = ErrorCode
_STREAM = "stream '{stream}' not found"
_TOPIC = "topic '{topic}' not found in stream '{stream}'"
_USERNAME = "{} to {}".format(*USERNAME_BYTES)
_PASSWORD = "{} to {}".format(*PASSWORD_BYTES)
_GROUP = "consumer group '{group}' not found in topic '{topic}' of stream '{stream}'"

TEMPLATES: dict[ErrorCode, str] = {
    E.STREAM_ID_NOT_FOUND: _STREAM,
    E.STREAM_NAME_NOT_FOUND: _STREAM,
    E.STREAM_NAME_ALREADY_EXISTS: "stream '{name}' already exists",
    E.TOPIC_ID_NOT_FOUND: _TOPIC,
    E.TOPIC_NAME_NOT_FOUND: _TOPIC,
    E.TOPIC_NAME_ALREADY_EXISTS: "topic '{name}' already exists in stream '{stream}'",
    E.PARTITION_NOT_FOUND: "partition {partition} not found in topic '{topic}'",
    E.CONSUMER_GROUP_ID_NOT_FOUND: _GROUP,
    E.CONSUMER_GROUP_NAME_NOT_FOUND: _GROUP,
    E.CONSUMER_GROUP_NAME_ALREADY_EXISTS:
        "consumer group '{name}' already exists in topic '{topic}'",
    E.CONSUMER_GROUP_MEMBER_NOT_FOUND: "this client is not a member of consumer group '{group}'",
    E.CONSUMER_OFFSET_NOT_FOUND: "no offset stored for consumer '{consumer}'",
    E.NOT_RESOLVED_CONSUMER: "partition {partition} is not assigned to this client in "
                             "consumer group '{consumer}' (or does not exist)",
    E.USER_ALREADY_EXISTS: "user '{new_user}' already exists",
    E.CLIENT_NOT_FOUND: "client {client_id} not found",
    E.RESOURCE_NOT_FOUND: "resource not found",
    E.PERSONAL_ACCESS_TOKEN_ALREADY_EXISTS: "personal access token '{name}' already exists",
    E.INVALID_CREDENTIALS: "invalid credentials for user '{login_user}' at {login_address}: "
                           "wrong username or password",
    E.INVALID_USERNAME: f"invalid username: a username takes {_USERNAME} bytes",
    E.INVALID_PASSWORD: f"invalid password: a password takes {_PASSWORD} bytes",
    E.INVALID_PERSONAL_ACCESS_TOKEN: "invalid personal access token for {login_address}",
    E.PERSONAL_ACCESS_TOKEN_EXPIRED: "personal access token expired; run 'lurcher login' again",
    E.UNAUTHENTICATED: "not logged in: give --username/--password, --token or --connection, "
                       "or use a context with credentials (lurcher context create)",
    E.UNAUTHORIZED: "permission denied: user '{login_user}' may not run this command",
    E.USER_INACTIVE: "user '{login_user}' is inactive",
    E.CANNOT_ESTABLISH_CONNECTION: "cannot connect to {login_address}: {detail}",
    E.TASK_TIMEOUT: "timed out talking to {login_address} ({detail})",
    E.NOT_CONNECTED: "not connected to {login_address} ({detail})",
    E.DISCONNECTED: "disconnected by the server at {login_address}",
    E.INVALID_CONNECTION_STRING: "invalid connection string: {detail}",
}


def _fill(template: str, fields: dict[str, Any]) -> str | None:
    names = {name for _, name, _, _ in string.Formatter().parse(template) if name}
    if any(fields.get(name) is None for name in names):
        return None
    return template.format_map(fields)


def fields_of(args: argparse.Namespace, detail: str = "") -> dict[str, Any]:
    fields = dict(vars(args))
    address = fields.get("login_address")
    if address and detail.startswith(f"{address}: "):
        detail = detail[len(address) + 2:]
    fields["detail"] = detail
    return fields


def not_over_transport(error: NotOverTransport, args: argparse.Namespace) -> CliError:
    """"'lurcher me' is not available over http (...); use --transport tcp, quic or ws"."""
    others = [t for t in TRANSPORTS if t != error.transport]
    use = ", ".join(others[:-1]) + f" or {others[-1]}"
    command = getattr(args, "command_name", None) or error.command
    return CliError(f"'{command}' is not available over {error.transport} "
                    f"({error.command}: {error.why}); "
                    f"use --transport {use}", ExitCode.ERROR, error.code)


def describe(error: IggyError, args: argparse.Namespace) -> CliError:
    """A CliError for ``error`` with a message naming the command's subject."""
    if isinstance(error, NotOverTransport):
        return not_over_transport(error, args)
    code = error.code
    if isinstance(error, InvalidArgument) and code == E.INVALID_FORMAT:  # nothing was sent
        return CliError(f"invalid argument: {error.detail}", ExitCode.USAGE, code)
    template = TEMPLATES.get(code)
    text = _fill(template, fields_of(args, error.detail)) if template else None
    if text is None:
        text = code.reason.lower() if code != E.ERROR else (error.detail or "command failed")
        if error.detail and code in (E.INVALID_HEADER_VALUE, E.INVALID_KEY_VALUE_LENGTH,
                                     E.INVALID_MESSAGES_COUNT, E.INVALID_HEADER_KIND,
                                     E.INVALID_TLS_CERTIFICATE_PATH, E.INVALID_TLS_CERTIFICATE):
            text = f"{text}: {error.detail}"
    return CliError(text, exit_code_for(code), code)


# The words and exit code of a failed connect-and-login for the statuses it means
# something else by: a username or password the server refuses for its form (checked
# before the user is looked up) is a refused login; a connection-string option the
# transport refuses (response_buffer_size, QUIC or WebSocket settings) is bad input.
LOGIN_TEMPLATES: dict[ErrorCode, tuple[str, ExitCode]] = {
    E.INVALID_USERNAME: ("login refused at {login_address}: '{login_user}' is not a valid "
                         f"username ({_USERNAME} bytes)", ExitCode.CREDENTIALS),
    E.INVALID_PASSWORD: ("login refused at {login_address}: the password given for "
                         f"'{{login_user}}' is not a valid password ({_PASSWORD} bytes)",
                         ExitCode.CREDENTIALS),
    E.INVALID_CONFIGURATION: ("invalid connection option for {login_address}: {detail}",
                              ExitCode.INPUT),
}


def describe_login(error: IggyError, args: argparse.Namespace) -> CliError:
    """``describe`` for a failed connect-and-login, with ``LOGIN_TEMPLATES`` first."""
    template, exit_code = LOGIN_TEMPLATES.get(error.code, (None, ExitCode.ERROR))
    text = _fill(template, fields_of(args, error.detail)) if template else None
    if not text or text.endswith(": "):
        return describe(error, args)
    return CliError(text, exit_code, error.code)


def not_found(code: ErrorCode, args: argparse.Namespace, what: str | None = None) -> CliError:
    """The CliError for an empty answer to a "get" command (``what`` overrides the text)."""
    text = what or _fill(TEMPLATES.get(code, ""), fields_of(args)) or code.reason.lower()
    return CliError(text, ExitCode.NOT_FOUND, code)


def id_or_name(value: str, by_id: ErrorCode, by_name: ErrorCode) -> ErrorCode:
    """``by_id`` for an all-digit identifier, ``by_name`` otherwise (as the server does)."""
    return by_id if Identifier.parse(str(value)).is_numeric else by_name
