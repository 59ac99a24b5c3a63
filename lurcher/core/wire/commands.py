"""The command table: every Iggy 0.8 command code with its wire facts.

One row per code: snake_case name, request type, response type (None = empty OK payload),
whether the response is a concatenated list, and whether an empty OK payload means "not
found" (None). Server-side columns (handler, permission) are joined onto this table by the
server; nothing here knows about them. ``decode_request`` / ``decode_response`` dispatch on it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from lurcher.core.wire.buffer import Buffer
from lurcher.core.wire.codec import Request, WireStruct
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import WireError
from lurcher.core.wire.requests.consumer_groups import (
    create_consumer_group as cg_create,
    delete_consumer_group as cg_delete,
    get_consumer_group as cg_get,
    get_consumer_groups as cg_get_all,
    join_consumer_group as cg_join,
    leave_consumer_group as cg_leave,
)
from lurcher.core.wire.requests.consumer_offsets import (
    delete_consumer_offset,
    get_consumer_offset,
    store_consumer_offset,
)
from lurcher.core.wire.requests.messages import flush_unsaved_buffer, poll_messages, send_messages
from lurcher.core.wire.requests.partitions import create_partitions, delete_partitions
from lurcher.core.wire.requests.pat import (
    create_personal_access_token,
    delete_personal_access_token,
    get_personal_access_tokens,
    login_with_personal_access_token,
)
from lurcher.core.wire.requests.segments import delete_segments
from lurcher.core.wire.requests.streams import (
    create_stream,
    delete_stream,
    get_stream,
    get_streams,
    purge_stream,
    update_stream,
)
from lurcher.core.wire.requests.system import (
    get_client,
    get_clients,
    get_cluster_metadata,
    get_me,
    get_snapshot_file,
    get_stats,
    ping,
)
from lurcher.core.wire.requests.topics import (
    create_topic,
    delete_topic,
    get_topic,
    get_topics,
    purge_topic,
    update_topic,
)
from lurcher.core.wire.requests.users import (
    change_password,
    create_user,
    delete_user,
    get_user,
    get_users,
    login_user,
    logout_user,
    update_permissions,
    update_user,
)
from lurcher.core.wire.responses.clients import ClientDetails, ClientHeader
from lurcher.core.wire.responses.cluster import ClusterMetadata
from lurcher.core.wire.responses.consumer_groups import GroupDetails, GroupHeader
from lurcher.core.wire.responses.consumer_offsets import ConsumerOffsetInfo
from lurcher.core.wire.responses.identity import IdentityInfo
from lurcher.core.wire.responses.messages import PolledMessages
from lurcher.core.wire.responses.personal_access_tokens import PatInfo, RawToken
from lurcher.core.wire.responses.snapshot import SnapshotFile
from lurcher.core.wire.responses.stats import Stats
from lurcher.core.wire.responses.streams import StreamDetails, StreamHeader
from lurcher.core.wire.responses.topics import TopicDetails, TopicHeader
from lurcher.core.wire.responses.users import UserDetails, UserHeader


class CommandSpec(msgspec.Struct, frozen=True):
    code: int
    name: str
    request: type[Request]
    response: type[WireStruct] | None = None
    response_is_list: bool = False
    response_optional: bool = False


_ONE, _LIST, _OPT = "one", "list", "optional"

# (request type, response type or None, response form)
_ROWS: list[tuple[type[Request], type[WireStruct] | None, str]] = [
    (ping.Ping, None, _ONE),
    (get_stats.GetStats, Stats, _ONE),
    (get_snapshot_file.GetSnapshotFile, SnapshotFile, _ONE),
    (get_cluster_metadata.GetClusterMetadata, ClusterMetadata, _ONE),
    (get_me.GetMe, ClientDetails, _ONE),
    (get_client.GetClient, ClientDetails, _OPT),
    (get_clients.GetClients, ClientHeader, _LIST),
    (get_user.GetUser, UserDetails, _OPT),
    (get_users.GetUsers, UserHeader, _LIST),
    (create_user.CreateUser, UserDetails, _ONE),
    (delete_user.DeleteUser, None, _ONE),
    (update_user.UpdateUser, None, _ONE),
    (update_permissions.UpdatePermissions, None, _ONE),
    (change_password.ChangePassword, None, _ONE),
    (login_user.LoginUser, IdentityInfo, _ONE),
    (logout_user.LogoutUser, None, _ONE),
    (get_personal_access_tokens.GetPersonalAccessTokens, PatInfo, _LIST),
    (create_personal_access_token.CreatePersonalAccessToken, RawToken, _ONE),
    (delete_personal_access_token.DeletePersonalAccessToken, None, _ONE),
    (login_with_personal_access_token.LoginWithPersonalAccessToken, IdentityInfo, _ONE),
    (poll_messages.PollMessages, PolledMessages, _ONE),
    (send_messages.SendMessages, None, _ONE),
    (flush_unsaved_buffer.FlushUnsavedBuffer, None, _ONE),
    (get_consumer_offset.GetConsumerOffset, ConsumerOffsetInfo, _OPT),
    (store_consumer_offset.StoreConsumerOffset, None, _ONE),
    (delete_consumer_offset.DeleteConsumerOffset, None, _ONE),
    (get_stream.GetStream, StreamDetails, _OPT),
    (get_streams.GetStreams, StreamHeader, _LIST),
    (create_stream.CreateStream, StreamDetails, _ONE),
    (delete_stream.DeleteStream, None, _ONE),
    (update_stream.UpdateStream, None, _ONE),
    (purge_stream.PurgeStream, None, _ONE),
    (get_topic.GetTopic, TopicDetails, _OPT),
    (get_topics.GetTopics, TopicHeader, _LIST),
    (create_topic.CreateTopic, TopicDetails, _ONE),
    (delete_topic.DeleteTopic, None, _ONE),
    (update_topic.UpdateTopic, None, _ONE),
    (purge_topic.PurgeTopic, None, _ONE),
    (create_partitions.CreatePartitions, None, _ONE),
    (delete_partitions.DeletePartitions, None, _ONE),
    (delete_segments.DeleteSegments, None, _ONE),
    (cg_get.GetConsumerGroup, GroupDetails, _OPT),
    (cg_get_all.GetConsumerGroups, GroupHeader, _LIST),
    (cg_create.CreateConsumerGroup, GroupDetails, _ONE),
    (cg_delete.DeleteConsumerGroup, None, _ONE),
    (cg_join.JoinConsumerGroup, None, _ONE),
    (cg_leave.LeaveConsumerGroup, None, _ONE),
]


def _snake(request: type[Request]) -> str:
    return request.__module__.rsplit(".", 1)[1]


COMMANDS: dict[int, CommandSpec] = {
    req.CODE: CommandSpec(req.CODE, _snake(req), req, resp, form == _LIST, form == _OPT)
    for req, resp, form in _ROWS
}
by_name: dict[str, CommandSpec] = {spec.name: spec for spec in COMMANDS.values()}
assert len(COMMANDS) == len(_ROWS) == len(by_name)


def spec_of(code: int) -> CommandSpec:
    """Raises WireError INVALID_COMMAND for a code outside the table."""
    spec = COMMANDS.get(code)
    if spec is None:
        raise WireError(f"unknown command code {code}", code=ErrorCode.INVALID_COMMAND)
    return spec


def decode_request(code: int, payload: Buffer) -> Request:
    """The typed request for ``code``; trailing bytes are ignored (0.8 server).

    Raises WireError (unknown code: INVALID_COMMAND).
    """
    return spec_of(code).request.decode_exact(payload)


def decode_response(code: int, payload: Buffer) -> Any:
    """The typed OK payload of ``code``: a value, a list, or None (empty / not found).

    Raises WireError.
    """
    spec = spec_of(code)
    if spec.response is None or (spec.response_optional and not len(payload)):
        return None
    if spec.response_is_list:
        return spec.response.decode_list(payload)
    return spec.response.decode_exact(payload)


def encode_response_payload(code: int, value: Any) -> bytes:
    """The OK payload for ``value`` (None -> empty; a list for list commands)."""
    spec = spec_of(code)
    if value is None:
        return b""
    if spec.response_is_list:
        return WireStruct.encode_list(value)
    return value.encode()
