"""Failure of a command -> the status answered to the client, for every front end.

Invariant: an ``IggyError`` is answered with its own status (logged at debug level); any
other exception is a server bug, answered with ``ErrorCode.ERROR`` and logged with its
traceback. HTTP maps the same status to its JSON answer.
"""

from __future__ import annotations

import logging

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

log = logging.getLogger(__name__)


def failure_status(what: object, exc: BaseException) -> int:
    """The status that answers ``exc``, raised while running ``what`` (a code or a label)."""
    if isinstance(exc, IggyError):
        log.debug("command %s -> %s", what, exc)
        return exc.status
    log.error("command %s failed", what, exc_info=exc)
    return ErrorCode.ERROR
