"""The root user, created on first start only.

Username ``LURCHER_ROOT_USERNAME`` (default ``iggy``); password ``LURCHER_ROOT_PASSWORD``, or
``iggy`` with ``--with-default-root-credentials``, otherwise generated and printed once.
Once users exist these inputs are ignored, so a later change of the variables does not
change the stored password. The root user has id ``ROOT_USER_ID`` (0), as in Iggy.
Credentials no login accepts (a username outside 3..50 bytes, a password outside 3..100)
are refused before anything is recorded: the start stops with one line.
"""

from __future__ import annotations

import logging
import secrets
from typing import Mapping

from lurcher.core.meta.events import UserCreated
from lurcher.core.meta.store import MetaStore
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.validation import PASSWORD_BYTES, USERNAME_BYTES, check_length
from lurcher.core.wire.values.permissions import GlobalPermissions, Permissions

log = logging.getLogger(__name__)

DEFAULT_ROOT_USERNAME = "iggy"
ROOT_USER_ID = 0  # the first user ever created; it cannot be deleted, deactivated or restricted
USER_ACTIVE = 1


def root_permissions() -> bytes:
    flags = {name: True for name in GlobalPermissions.__struct_fields__}
    return Permissions(global_=GlobalPermissions(**flags)).encode()


def refuse_unusable(username: str, password: str) -> None:
    """Raise IggyError (INVALID_USERNAME, INVALID_PASSWORD) naming the variable when a login
    could not use the credentials (LoginUser holds them to ``USERNAME_BYTES`` and
    ``PASSWORD_BYTES``, as Iggy 0.8 holds its root user at start): the root user is made once,
    so it would be locked out for good."""
    for variable, value, bounds, code in (
            ("LURCHER_ROOT_USERNAME", username, USERNAME_BYTES, ErrorCode.INVALID_USERNAME),
            ("LURCHER_ROOT_PASSWORD", password, PASSWORD_BYTES, ErrorCode.INVALID_PASSWORD)):
        try:
            check_length(value, bounds, code)
        except IggyError as exc:
            raise IggyError(code, f"{variable}: {exc.detail}, which no login accepts; nothing "
                                  f"was created") from None


def ensure_root(meta: MetaStore, hash_password, environ: Mapping[str, str],
                default_credentials: bool, now_us: int) -> str | None:
    """Create the root user if no user exists; returns a generated password to show, or None.
    When users exist, root credentials in the environment are ignored with a warning."""
    if meta.state.users:
        given = [n for n in ("LURCHER_ROOT_USERNAME", "LURCHER_ROOT_PASSWORD") if environ.get(n)]
        if given:
            root = meta.state.users.get(ROOT_USER_ID)
            log.warning("the stored root user %r is kept: %s ignored (root credentials are "
                        "used on the first start only; change the password with the "
                        "change-password command)", root.username if root else "?",
                        " and ".join(given))
        return None
    username = environ.get("LURCHER_ROOT_USERNAME") or DEFAULT_ROOT_USERNAME
    password = environ.get("LURCHER_ROOT_PASSWORD")
    generated = None
    if not password:
        password = "iggy" if default_credentials else secrets.token_urlsafe(18)
        generated = None if default_credentials else password
    refuse_unusable(username, password)
    meta.record(UserCreated(ROOT_USER_ID, username, hash_password(password),
                            USER_ACTIVE, root_permissions(), now_us))
    log.info("created root user %r", username)
    return generated
