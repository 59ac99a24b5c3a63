"""The root user, created on first start only.

Username ``LURCHER_ROOT_USERNAME`` (default ``iggy``); password ``LURCHER_ROOT_PASSWORD``, or
``iggy`` with ``--with-default-root-credentials``, otherwise generated and printed once.
Once users exist these inputs are ignored, so a later change of the variables does not
change the stored password. The root user has id ``ROOT_USER_ID`` (0), as in Iggy.
"""

from __future__ import annotations

import logging
import secrets
from typing import Mapping

from lurcher.core.meta.events import UserCreated
from lurcher.core.meta.store import MetaStore
from lurcher.core.wire.values.permissions import GlobalPermissions, Permissions

log = logging.getLogger(__name__)

DEFAULT_ROOT_USERNAME = "iggy"
ROOT_USER_ID = 0  # the first user ever created; it cannot be deleted, deactivated or restricted
USER_ACTIVE = 1


def root_permissions() -> bytes:
    flags = {name: True for name in GlobalPermissions.__struct_fields__}
    return Permissions(global_=GlobalPermissions(**flags)).encode()


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
    meta.record(UserCreated(ROOT_USER_ID, username, hash_password(password),
                            USER_ACTIVE, root_permissions(), now_us))
    log.info("created root user %r", username)
    return generated
