"""Exceptions of the wire layer.

``WireError`` is what every decoder raises: the buffer could not be decoded (truncated,
or structurally invalid). ``IggyError`` is a failed command carrying an Iggy status code;
handlers raise it, the SDK raises it for non-zero statuses. Both carry an ``ErrorCode`` so
the connection boundary turns them into a status without looking at the message text.
"""

from __future__ import annotations

from lurcher.core.wire.error_codes import ErrorCode


class IggyError(Exception):
    """A command failed with an Iggy status code."""

    def __init__(self, code: ErrorCode | int, detail: str = "") -> None:
        self.code = ErrorCode.of(int(code))
        self.status = int(code)
        self.detail = detail
        text = f"{self.code.iggy_name} ({self.status})"
        super().__init__(f"{text}: {detail}" if detail else text)


class WireError(IggyError):
    """Bytes that do not decode.

    ``offset`` is where decoding stopped; ``needed`` is how many more bytes were
    required (0 when the bytes were present but invalid). The default status is
    ``INVALID_COMMAND`` for truncation and ``INVALID_FORMAT`` for invalid content,
    as the 0.8 server answers.
    """

    def __init__(
        self,
        detail: str,
        *,
        offset: int = 0,
        needed: int = 0,
        code: ErrorCode | None = None,
    ) -> None:
        if code is None:
            code = ErrorCode.INVALID_COMMAND if needed else ErrorCode.INVALID_FORMAT
        self.offset = offset
        self.needed = needed
        super().__init__(code, detail)


def truncated(what: str, offset: int, needed: int) -> WireError:
    """A WireError for ``needed`` missing bytes while reading ``what`` at ``offset``."""
    return WireError(f"{what}: {needed} more byte(s) needed at offset {offset}",
                     offset=offset, needed=needed)
