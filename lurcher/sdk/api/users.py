"""User, permission, session and personal-access-token commands.

``login_user`` / ``login_with_personal_access_token`` remember the credentials so the client
logs in again by itself after a reconnect; ``logout_user`` forgets them.
"""

from __future__ import annotations

from lurcher.core.wire.codec import Request
from lurcher.core.wire.requests.pat.create_personal_access_token import CreatePersonalAccessToken
from lurcher.core.wire.requests.pat.delete_personal_access_token import DeletePersonalAccessToken
from lurcher.core.wire.requests.pat.get_personal_access_tokens import GetPersonalAccessTokens
from lurcher.core.wire.requests.pat.login_with_personal_access_token import (
    LoginWithPersonalAccessToken,
)
from lurcher.core.wire.requests.users.change_password import ChangePassword
from lurcher.core.wire.requests.users.create_user import CreateUser
from lurcher.core.wire.requests.users.delete_user import DeleteUser
from lurcher.core.wire.requests.users.get_user import GetUser
from lurcher.core.wire.requests.users.get_users import GetUsers
from lurcher.core.wire.requests.users.login_user import LoginUser
from lurcher.core.wire.requests.users.logout_user import LogoutUser
from lurcher.core.wire.requests.users.update_permissions import UpdatePermissions
from lurcher.core.wire.requests.users.update_user import UpdateUser
from lurcher.core.wire.responses.identity import IdentityInfo
from lurcher.core.wire.responses.personal_access_tokens import PatInfo
from lurcher.core.wire.responses.users import UserDetails, UserHeader
from lurcher.core.wire.values.permissions import Permissions
from lurcher.sdk.api.base import ApiBase, Id, ident

SDK_VERSION = "lurcher-sdk 0.1.0"
USER_STATUS = {"active": 1, "inactive": 2}


def user_status(status: str | int) -> int:
    """1 (active) or 2 (inactive) from a name or a number. Raises KeyError for other names."""
    return status if isinstance(status, int) else USER_STATUS[status]


class UsersApi(ApiBase):
    _login: Request | None = None

    async def get_user(self, user_id: Id) -> UserDetails | None:
        return await self._call(GetUser(ident(user_id)))

    async def get_users(self) -> list[UserHeader]:
        return await self._call(GetUsers())

    async def create_user(self, username: str, password: str, status: str | int = "active",
                          permissions: Permissions | None = None) -> UserDetails:
        return await self._call(CreateUser(username, password, user_status(status), permissions))

    async def delete_user(self, user_id: Id) -> None:
        await self._call(DeleteUser(ident(user_id)))

    async def update_user(self, user_id: Id, username: str | None = None,
                          status: str | int | None = None) -> None:
        code = None if status is None else user_status(status)
        await self._call(UpdateUser(ident(user_id), username, code))

    async def update_permissions(self, user_id: Id, permissions: Permissions | None) -> None:
        await self._call(UpdatePermissions(ident(user_id), permissions))

    async def change_password(self, user_id: Id, current_password: str, new_password: str) -> None:
        await self._call(ChangePassword(ident(user_id), current_password, new_password))

    async def login_user(self, username: str, password: str) -> IdentityInfo:
        """LoginUser (38); remembered for re-login after reconnects."""
        request = LoginUser(username, password, SDK_VERSION, None)
        identity = await self._call(request)
        self._login = request
        return identity

    async def logout_user(self) -> None:
        await self._call(LogoutUser())
        self._login = None

    async def get_personal_access_tokens(self) -> list[PatInfo]:
        return await self._call(GetPersonalAccessTokens())

    async def create_personal_access_token(self, name: str, expiry_us: int = 0) -> str:
        """A new token (the raw secret, shown once). ``expiry_us`` 0 = server default."""
        raw = await self._call(CreatePersonalAccessToken(name, expiry_us))
        return raw.token

    async def delete_personal_access_token(self, name: str) -> None:
        await self._call(DeletePersonalAccessToken(name))

    async def login_with_personal_access_token(self, token: str) -> IdentityInfo:
        """LoginWithPersonalAccessToken (44); remembered for re-login after reconnects."""
        request = LoginWithPersonalAccessToken(token)
        identity = await self._call(request)
        self._login = request
        return identity
