"""JWT access tokens of the HTTP API (wire §14.4): issue, verify, refresh, revoke.

HS256 tokens with claims ``jti`` (UUIDv7-like: time-ordered), ``iss``, ``aud``, ``sub``
(user id as a string), ``iat``, ``nbf``, ``exp`` (seconds), ``user_created_at`` (the user's
creation time in µs: user ids are reused after a delete, so the HTTP API accepts a token
only while the user with its id is the one it was issued to) and, after a
personal-access-token login, ``token_name`` (the HTTP API accepts the JWT only while that
token exists, as a binary session logged in with it ends with it). Settings come from
``[http.jwt]``. When ``encoding_secret`` is empty a random secret is generated once and kept
in ``<system.path>/state/jwt_secret`` (mode 0600), so tokens survive a restart. That file
empty (a crash before its bytes reached the disk) gets a new secret (logged: tokens issued
before are invalid); one holding fewer than ``SECRET_BYTES`` characters or not UTF-8
(damaged: a short key would let anyone forge tokens) stops the start (``SecretDamaged``, one
line naming it). ``clock_skew`` and ``not_before`` "none" are 0 (no skew, no delay);
``access_token_expiry`` "none" never expires. Revoked token ids are appended to
``<system.path>/state/tokens`` as ``jti expiry_s`` lines; entries past their expiry are
dropped when the file is loaded (and the file rewritten; damaged lines, a torn append or bytes
that are not UTF-8, are dropped with one warning) and as later ids are revoked (the file
rewritten once most of its lines expired), so neither grows with repeated login/logout. A
revocation whose line cannot be written (descriptors used up, a full disk) is refused with
CANNOT_WRITE_TO_FILE and changes nothing, in memory either: the token stays valid, as a restart
would find it. A refresh revokes the token it replaces, and needs no password, so one client
could refresh hundreds of times a second and fill memory and that file with ids for a whole
token lifetime; ``[http.jwt] max_refreshes_per_user`` caps the ids a user's refreshes keep
revoked at once (line ``jti expiry_s user_id user_created_at``): beyond it a refresh is refused
(401) until some expire, and the user logs in again. The count is the login's, a user id with
its creation time (``RefreshLogin``): a user given a deleted user's id starts from none (lines
of older servers, without the creation time, count for no user that can refresh, until they
expire).
"""

from __future__ import annotations

import logging
import os
import secrets
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import jwt as pyjwt

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire import units
from lurcher.core.wire.buffer import U32_MAX
from lurcher.core.wire.units import US_PER_S
from lurcher.runtime.settings import seconds

if TYPE_CHECKING:
    from lurcher.runtime.settings import Jwt

ALGORITHM = "HS256"
SECRET_BYTES = 32  # of randomness in a generated secret; the least characters of a stored one

log = logging.getLogger(__name__)


class SecretDamaged(OSError):
    """``state/jwt_secret`` cannot be a secret this server wrote: the start stops."""


# who refreshed: (user id, the user's creation time in µs; None on lines of older servers)
RefreshLogin = tuple[int, "int | None"]


@dataclass(frozen=True)
class Token:
    token: str
    jti: str
    user_id: int
    expiry_s: int
    user_created_at: int | None = None  # None: a token without the claim
    token_name: str | None = None  # the personal access token of the login, if one


def uuid7(now_ms: int) -> str:
    """A version-7 UUID string (48-bit ms timestamp + random bits)."""
    value = (now_ms & ((1 << 48) - 1)) << 80 | secrets.randbits(80)
    value = (value & ~(0xF << 76)) | (0x7 << 76)
    value = (value & ~(0x3 << 62)) | (0x2 << 62)
    return str(uuid.UUID(int=value))


def _write_private(path: Path, data: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(data)
    os.replace(tmp, path)


def load_secret(section: Jwt, state_path: Path) -> tuple[str, str]:
    """(encoding, decoding) secrets: configured, or generated and persisted once (module
    docstring). Raises SecretDamaged, OSError."""
    encoding = section.encoding_secret or section.decoding_secret  # either serves as both,
    decoding = section.decoding_secret or encoding                 # as in Iggy 0.8
    if encoding:
        return encoding, decoding
    path = state_path / "jwt_secret"
    stored = path.read_bytes().strip() if path.exists() else b""
    if not stored:
        if path.exists():
            log.warning("%s is empty (a crash before it reached the disk?): a new secret is "
                        "generated, tokens issued before are no longer accepted", path)
        _write_private(path, secrets.token_urlsafe(SECRET_BYTES))
        stored = path.read_bytes().strip()
    try:
        secret = stored.decode()
    except UnicodeDecodeError:
        secret = ""
    if len(secret) < SECRET_BYTES:
        raise SecretDamaged(f"{path} is damaged ({len(stored)} bytes, not a secret of at least "
                            f"{SECRET_BYTES} UTF-8 characters): remove it to have a new one "
                            f"generated (tokens issued before are then no longer accepted)")
    return secret, secret


def _revoked_line(jti: str, expiry_s: int, login: RefreshLogin | None) -> str:
    """A line of the revoked tokens file (``RevokedTokens._load`` reads it back)."""
    if login is None:
        return f"{jti} {expiry_s}\n"
    user, created = login
    return f"{jti} {expiry_s} {user}\n" if created is None else \
        f"{jti} {expiry_s} {user} {created}\n"


class RevokedTokens:
    """Revoked ``jti``s with their expiry, persisted as an append-only text file.

    Ids are added in about expiry order (every token lives as long), so expired ones are
    dropped from the oldest on as new ones are added; the file is rewritten once it holds
    more dropped lines than live ones. Both stay bounded by the tokens revoked within one
    token lifetime. Ids a refresh revoked are counted per login (``refreshes_of``)."""

    def __init__(self, path: Path, now_s: int) -> None:
        self.path = path
        self.revoked: dict[str, int] = {}
        self.refreshed_by: dict[str, RefreshLogin] = {}  # jti -> login, for refreshes' ids
        self.refreshes: Counter[RefreshLogin] = Counter()  # login -> live ids it revoked
        self.lines_dropped = 0  # lines of the file whose id expired since it was written
        if path.exists():
            lines = path.read_bytes().split(b"\n")
            torn = lines.pop()  # b"" unless the last append was cut (every line ends "\n")
            damaged = sum(not self._load(line, now_s) for line in lines) + bool(torn)
            if damaged:
                log.warning("%s: %d damaged line(s) ignored: a token one of them revoked is "
                            "accepted again until it expires", path, damaged)
            self._rewrite()

    def _load(self, line: bytes, now_s: int) -> bool:
        """One line of the file: ``jti expiry_s``, optionally followed by ``user_id`` and
        ``user_created_at``; False when it is none of these (damaged: a torn append, or bytes
        that are not UTF-8)."""
        try:
            fields = line.decode().split(" ")
        except UnicodeDecodeError:
            return False
        exp = units.decimal(fields[1], units.U64_MAX) if len(fields) in (2, 3, 4) else None
        if exp is None:
            return False
        if exp <= now_s:
            return True
        self.revoked[fields[0]] = exp
        user = units.decimal(fields[2], U32_MAX) if len(fields) >= 3 else None
        created = units.decimal(fields[3], units.U64_MAX) if len(fields) == 4 else None
        if user is not None:
            self._count(fields[0], (user, created))
        return True

    def _count(self, jti: str, login: RefreshLogin) -> None:
        self.refreshed_by[jti] = login
        self.refreshes[login] += 1

    def _line(self, jti: str, expiry_s: int) -> str:
        return _revoked_line(jti, expiry_s, self.refreshed_by.get(jti))

    def __contains__(self, jti: str) -> bool:
        return jti in self.revoked

    def _rewrite(self) -> None:
        _write_private(self.path, "".join(self._line(j, e) for j, e in self.revoked.items()))
        self.lines_dropped = 0

    def _drop_expired(self, now_s: int) -> None:
        """Drop the oldest ids while they are expired; compact the file when worth it."""
        while self.revoked:
            jti, expiry_s = next(iter(self.revoked.items()))
            if expiry_s > now_s:
                break
            del self.revoked[jti]
            self.lines_dropped += 1
            login = self.refreshed_by.pop(jti, None)
            if login is not None:
                self.refreshes[login] -= 1
                if not self.refreshes[login]:
                    del self.refreshes[login]
        if self.lines_dropped > len(self.revoked):
            try:
                self._rewrite()
            except OSError as exc:  # the file keeps its expired lines until the next try
                log.error("cannot compact %s: %s", self.path, exc)

    def revoke(self, jti: str, expiry_s: int, now_s: int,
               refreshed_by: RefreshLogin | None = None) -> None:
        """Revoke ``jti`` until ``expiry_s``; ``refreshed_by``: the login whose refresh
        replaced it."""
        if jti in self.revoked:
            return
        self._drop_expired(now_s)
        self._append(_revoked_line(jti, expiry_s, refreshed_by))
        self.revoked[jti] = expiry_s
        if refreshed_by is not None:
            self._count(jti, refreshed_by)

    def _append(self, line: str) -> None:
        """Add ``line`` to the file. Raises IggyError CANNOT_WRITE_TO_FILE (logged) when it
        cannot be written: the token is then not revoked, in memory either, so what a
        restart reads is what was answered."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as out:
                out.write(line)
        except OSError as exc:
            log.error("cannot record a revoked token in %s: %s", self.path, exc)
            raise IggyError(ErrorCode.CANNOT_WRITE_TO_FILE, f"token not revoked: {exc}") from exc

    def refreshes_of(self, login: RefreshLogin, now_s: int) -> int:
        """How many unexpired ids the refreshes of ``login`` revoked."""
        self._drop_expired(now_s)
        return self.refreshes[login]


class JwtManager:
    """Issues and checks access tokens for one server."""

    def __init__(self, section: Jwt, state_path: Path,
                 clock_s: Callable[[], float] = time.time) -> None:
        self.clock_s = clock_s
        self.encoding_secret, self.decoding_secret = load_secret(section, state_path)
        self.issuer = section.issuer
        self.audience = section.audience
        self.valid_issuers = section.valid_issuers or [self.issuer]
        self.valid_audiences = section.valid_audiences or [self.audience]
        self.expiry_s = section.access_token_expiry // US_PER_S  # "none": never expires
        # "none" is no skew and no delay (settings.seconds): as microseconds it made every
        # token valid forever (clock_skew) or never (not_before)
        self.leeway_s = int(seconds(section.clock_skew))
        self.not_before_s = int(seconds(section.not_before))
        self.revoked = RevokedTokens(state_path / "tokens", int(clock_s()))
        self.max_refreshes = section.max_refreshes_per_user

    def issue(self, user_id: int, user_created_at: int, token_name: str | None = None) -> Token:
        """A token for the user ``user_id`` created at ``user_created_at`` (µs), logged in
        with the personal access token ``token_name`` (None: with its password)."""
        now = int(self.clock_s())
        jti = uuid7(now * 1000)
        exp = now + self.expiry_s
        claims = {"jti": jti, "iss": self.issuer, "aud": self.audience, "sub": str(user_id),
                  "iat": now, "nbf": now + self.not_before_s, "exp": exp,
                  "user_created_at": user_created_at}
        if token_name is not None:
            claims["token_name"] = token_name
        return Token(pyjwt.encode(claims, self.encoding_secret, algorithm=ALGORITHM), jti,
                     user_id, exp, user_created_at, token_name)

    def verify(self, token: str) -> Token:
        """The token's claims. Raises IggyError UNAUTHENTICATED (bad, expired or revoked)."""
        try:
            claims = pyjwt.decode(token, self.decoding_secret, algorithms=[ALGORITHM],
                                  audience=self.valid_audiences, issuer=self.valid_issuers,
                                  leeway=self.leeway_s,
                                  options={"require": ["exp", "sub", "jti"]})
        except pyjwt.PyJWTError as exc:
            raise IggyError(ErrorCode.UNAUTHENTICATED, f"invalid token: {exc}") from None
        jti = str(claims["jti"])
        if jti in self.revoked:
            raise IggyError(ErrorCode.UNAUTHENTICATED, "token revoked")
        try:
            user_id = int(claims["sub"])
        except ValueError:
            raise IggyError(ErrorCode.UNAUTHENTICATED, "invalid subject") from None
        created, token_name = claims.get("user_created_at"), claims.get("token_name")
        return Token(token, jti, user_id, int(claims["exp"]),
                     created if isinstance(created, int) else None,
                     token_name if isinstance(token_name, str) else None)

    def revoke(self, token: Token) -> None:
        self.revoked.revoke(token.jti, token.expiry_s, int(self.clock_s()))

    def refresh(self, token: str, check: Callable[[Token], None] = lambda token: None) -> Token:
        """A new token for the same user; the old one is revoked. ``check`` runs on the old
        one first and refuses by raising (nothing counted or revoked then). Raises IggyError
        (UNAUTHENTICATED also when the refreshes of the token's login, its user id and
        creation time, hold ``max_refreshes`` ids)."""
        old = self.verify(token)
        check(old)
        now_s = int(self.clock_s())
        login = (old.user_id, old.user_created_at)
        refreshes = self.revoked.refreshes_of(login, now_s)
        if self.max_refreshes and refreshes >= self.max_refreshes:
            raise IggyError(ErrorCode.UNAUTHENTICATED,
                            f"user {old.user_id} refreshed {self.max_refreshes} tokens within "
                            "a token lifetime")
        self.revoked.revoke(old.jti, old.expiry_s, now_s, refreshed_by=login)
        return self.issue(old.user_id, old.user_created_at, old.token_name)
