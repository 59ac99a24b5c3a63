"""The CLI's exit codes (one table) and ``CliError``, the exception every command raises
for a failure it can name.

Invariant: every non-zero exit goes through ``ExitCode``; ``EXIT_CODES_HELP`` is generated
from the same table and shown in ``lurcher --help``. Server status codes map to exit codes
with ``exit_code_for`` (by family: not found, already exists, authentication, ...).
A login refused for its credentials (wrong username or password, unknown token) has its
own code, CREDENTIALS, apart from AUTHENTICATION (not logged in, or no longer allowed to
be: inactive user, expired token); a username or password refused for its form by a user
command (create, rename, change password) is bad INPUT.
"""

from __future__ import annotations

import enum

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.sdk.cli.output import printable


class ExitCode(enum.IntEnum):
    OK = 0
    ERROR = 1
    USAGE = 2
    NOT_FOUND = 3
    ALREADY_EXISTS = 4
    AUTHENTICATION = 5
    PERMISSION = 6
    CONNECTION = 7
    INPUT = 8
    CONFIG = 9
    CREDENTIALS = 10
    INTERRUPTED = 130


EXIT_CODE_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "success (also: --follow stopped by Ctrl-C, SIGTERM or --max)",
    ExitCode.ERROR: "the server refused the command (any other Iggy error)",
    ExitCode.USAGE: "bad command line (unknown option, missing or malformed argument)",
    ExitCode.NOT_FOUND: "stream, topic, partition, group, user, client, token ... not found",
    ExitCode.ALREADY_EXISTS: "the resource to create already exists",
    ExitCode.AUTHENTICATION: "not logged in, inactive user, expired token",
    ExitCode.PERMISSION: "the user lacks the permission for the command",
    ExitCode.CONNECTION: "cannot connect to the server, connection lost, or timed out",
    ExitCode.INPUT: "bad local input (file, header, id, permissions, connection string), "
                    "or output that cannot be written",
    ExitCode.CONFIG: "CLI configuration problem (unknown context, unreadable config file)",
    ExitCode.CREDENTIALS: "login refused: wrong username or password, unknown token",
    ExitCode.INTERRUPTED: "interrupted by Ctrl-C (commands other than --follow)",
}

_AUTH_CODES = frozenset({
    ErrorCode.UNAUTHENTICATED, ErrorCode.USER_INACTIVE, ErrorCode.PERSONAL_ACCESS_TOKEN_EXPIRED,
    ErrorCode.ACCESS_TOKEN_MISSING, ErrorCode.INVALID_ACCESS_TOKEN,
})
_CREDENTIALS_CODES = frozenset({
    ErrorCode.INVALID_CREDENTIALS, ErrorCode.INVALID_PERSONAL_ACCESS_TOKEN,
})
_CONNECTION_CODES = frozenset({
    ErrorCode.DISCONNECTED, ErrorCode.CANNOT_ESTABLISH_CONNECTION, ErrorCode.TCP_ERROR,
    ErrorCode.QUIC_ERROR, ErrorCode.HTTP_ERROR, ErrorCode.NOT_CONNECTED,
    ErrorCode.CLIENT_SHUTDOWN, ErrorCode.CONNECTION_CLOSED, ErrorCode.WEB_SOCKET_CONNECTION_ERROR,
    ErrorCode.INVALID_SERVER_ADDRESS, ErrorCode.TASK_TIMEOUT,
})
_INPUT_CODES = frozenset({
    ErrorCode.INVALID_CONNECTION_STRING, ErrorCode.INVALID_HEADER_KEY,
    ErrorCode.INVALID_HEADER_VALUE, ErrorCode.INVALID_HEADER_KIND, ErrorCode.TOO_BIG_USER_HEADERS,
    ErrorCode.INVALID_KEY_VALUE_LENGTH, ErrorCode.INVALID_MESSAGES_COUNT,
    ErrorCode.INVALID_TLS_CERTIFICATE_PATH, ErrorCode.INVALID_TLS_CERTIFICATE,
    ErrorCode.INVALID_USERNAME, ErrorCode.INVALID_PASSWORD,
})


def exit_code_for(code: ErrorCode) -> ExitCode:
    """The exit code for a server (or SDK) status (outside a login: see ``errors``)."""
    if code in _AUTH_CODES:
        return ExitCode.AUTHENTICATION
    if code in _CREDENTIALS_CODES:
        return ExitCode.CREDENTIALS
    if code == ErrorCode.UNAUTHORIZED:
        return ExitCode.PERMISSION
    if code in _CONNECTION_CODES:
        return ExitCode.CONNECTION
    if code in _INPUT_CODES:
        return ExitCode.INPUT
    if code.name.endswith("NOT_FOUND"):
        return ExitCode.NOT_FOUND
    if code.name.endswith("ALREADY_EXISTS"):
        return ExitCode.ALREADY_EXISTS
    return ExitCode.ERROR


def exit_codes_help() -> str:
    """The ``--help`` epilog: one line per exit code."""
    lines = ["exit codes:"]
    lines += [f"  {int(code):>3}  {text}" for code, text in EXIT_CODE_MEANINGS.items()]
    return "\n".join(lines)


class CliError(Exception):
    """A failure with a message for the user and the exit code to end with.

    ``code`` is the Iggy status when the failure has one (printed as ``(Name, number)``).
    """

    def __init__(self, message: str, exit_code: ExitCode = ExitCode.ERROR,
                 code: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.code = code

    def render(self) -> str:
        suffix = f" ({self.code.iggy_name}, {int(self.code)})" if self.code is not None else ""
        return f"error: {printable(self.message)}{suffix}"
