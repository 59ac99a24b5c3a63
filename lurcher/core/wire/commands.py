"""The command registry: one ``CommandSpec`` per Iggy 0.8 command, the only place its facts live.

A spec holds the code, the snake_case name (the request module's name, as 0.8 names it),
request type, response type (None = empty OK payload), whether the response is a list or
optional (empty OK payload = not found), the permission rule (``PUBLIC``, ``AUTHENTICATED``
or a rule of ``auth.permissions``), the routing kind (where a multi-shard server runs it) and
the REST route (None = no HTTP route). The server's dispatcher, router and HTTP route table
and the SDK's HTTP table are derived from it; the server checks at start that every spec has
a handler and a known permission rule. Invariant: codes and names are unique.
``decode_request`` / ``decode_response`` dispatch on it.
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


# Permission rules a spec may name besides the rules of ``auth.permissions``.
PUBLIC = "public"                # no login needed (ping, the logins)
AUTHENTICATED = "authenticated"  # any logged-in session

# Routing kinds (where a command runs when the server has several shards; ``shard.routing``).
LOCAL, META, GATHER, BROADCAST, PARTITION = "local", "meta", "gather", "broadcast", "partition"
OWNER = "owner"  # reads only shard 0 answers (it runs the cluster node)
ROUTING_KINDS = frozenset({LOCAL, META, OWNER, GATHER, BROADCAST, PARTITION})


class RestRoute(msgspec.Struct, frozen=True):
    """The command's REST route: method and a path template whose ``{field}`` names are
    filled from the request (SDK) or read back into it (server)."""

    method: str
    path: str


# lurcher only, no binary command: the cluster's replication groups and lag as JSON
# (``cluster.status``). GetClusterMetadata (12) keeps Iggy's shape, so Iggy clients read it.
CLUSTER_STATUS_ROUTE = RestRoute("GET", "/cluster/status")


class CommandSpec(msgspec.Struct, frozen=True):
    """Everything about one command that more than one layer needs."""

    code: int
    name: str
    request: type[Request]
    response: type[WireStruct] | None = None
    response_is_list: bool = False
    response_optional: bool = False
    permission: str = AUTHENTICATED
    routing: str = LOCAL
    rest: RestRoute | None = None

    @property
    def login_required(self) -> bool:
        return self.permission != PUBLIC

    @property
    def permission_rule(self) -> str:
        """The ``auth.permissions`` rule to check ("" = none beyond the login check)."""
        return "" if self.permission in (PUBLIC, AUTHENTICATED) else self.permission


_ONE, _LIST, _OPT = "one", "list", "optional"
_ST = "/streams/{stream_id}/topics/{topic_id}"


def _snake(request: type[Request]) -> str:
    return request.__module__.rsplit(".", 1)[1]


def _spec(request: type[Request], response: type[WireStruct] | None, form: str,
          permission: str, routing: str, rest: str | None = None) -> CommandSpec:
    """One row: ``rest`` is "METHOD /path/{field}" or None (no REST route)."""
    route = RestRoute(*rest.split(" ", 1)) if rest else None
    return CommandSpec(request.CODE, _snake(request), request, response, form == _LIST,
                       form == _OPT, permission, routing, route)


_AUTH = AUTHENTICATED
_SPECS: list[CommandSpec] = [
    _spec(ping.Ping, None, _ONE, PUBLIC, LOCAL, "GET /ping"),
    _spec(get_stats.GetStats, Stats, _ONE, "server_info", GATHER, "GET /stats"),
    _spec(get_snapshot_file.GetSnapshotFile, SnapshotFile, _ONE, "server_info", LOCAL,
          "POST /snapshot"),
    _spec(get_cluster_metadata.GetClusterMetadata, ClusterMetadata, _ONE, _AUTH, OWNER,
          "GET /cluster/metadata"),
    _spec(get_me.GetMe, ClientDetails, _ONE, _AUTH, LOCAL),
    _spec(get_client.GetClient, ClientDetails, _OPT, "server_info", GATHER,
          "GET /clients/{client_id}"),
    _spec(get_clients.GetClients, ClientHeader, _LIST, "server_info", GATHER, "GET /clients"),
    _spec(get_user.GetUser, UserDetails, _OPT, "read_user", LOCAL, "GET /users/{user_id}"),
    _spec(get_users.GetUsers, UserHeader, _LIST, "read_users", LOCAL, "GET /users"),
    _spec(create_user.CreateUser, UserDetails, _ONE, "manage_users", META, "POST /users"),
    _spec(delete_user.DeleteUser, None, _ONE, "manage_users", META, "DELETE /users/{user_id}"),
    _spec(update_user.UpdateUser, None, _ONE, "manage_users", META, "PUT /users/{user_id}"),
    _spec(update_permissions.UpdatePermissions, None, _ONE, "manage_users", META,
          "PUT /users/{user_id}/permissions"),
    _spec(change_password.ChangePassword, None, _ONE, "change_password", META,
          "PUT /users/{user_id}/password"),
    _spec(login_user.LoginUser, IdentityInfo, _ONE, PUBLIC, LOCAL, "POST /users/login"),
    _spec(logout_user.LogoutUser, None, _ONE, _AUTH, LOCAL, "DELETE /users/logout"),
    _spec(get_personal_access_tokens.GetPersonalAccessTokens, PatInfo, _LIST, _AUTH, LOCAL,
          "GET /personal-access-tokens"),
    _spec(create_personal_access_token.CreatePersonalAccessToken, RawToken, _ONE, _AUTH, META,
          "POST /personal-access-tokens"),
    _spec(delete_personal_access_token.DeletePersonalAccessToken, None, _ONE, _AUTH, META,
          "DELETE /personal-access-tokens/{name}"),
    _spec(login_with_personal_access_token.LoginWithPersonalAccessToken, IdentityInfo, _ONE,
          PUBLIC, LOCAL, "POST /personal-access-tokens/login"),
    _spec(poll_messages.PollMessages, PolledMessages, _ONE, "poll_messages", PARTITION,
          f"GET {_ST}/messages"),
    _spec(send_messages.SendMessages, None, _ONE, "send_messages", PARTITION,
          f"POST {_ST}/messages"),
    _spec(flush_unsaved_buffer.FlushUnsavedBuffer, None, _ONE, "send_messages", PARTITION,
          f"GET {_ST}/messages/flush/{{partition_id}}/{{fsync}}"),
    _spec(get_consumer_offset.GetConsumerOffset, ConsumerOffsetInfo, _OPT, "poll_messages",
          PARTITION, f"GET {_ST}/consumer-offsets"),
    _spec(store_consumer_offset.StoreConsumerOffset, None, _ONE, "poll_messages", PARTITION,
          f"PUT {_ST}/consumer-offsets"),
    _spec(delete_consumer_offset.DeleteConsumerOffset, None, _ONE, "poll_messages", PARTITION,
          f"DELETE {_ST}/consumer-offsets/{{consumer_id}}"),
    _spec(get_stream.GetStream, StreamDetails, _OPT, "read_stream", GATHER,
          "GET /streams/{stream_id}"),
    _spec(get_streams.GetStreams, StreamHeader, _LIST, "list_streams", GATHER, "GET /streams"),
    _spec(create_stream.CreateStream, StreamDetails, _ONE, "create_stream", META,
          "POST /streams"),
    _spec(delete_stream.DeleteStream, None, _ONE, "manage_stream", META,
          "DELETE /streams/{stream_id}"),
    _spec(update_stream.UpdateStream, None, _ONE, "manage_stream", META,
          "PUT /streams/{stream_id}"),
    _spec(purge_stream.PurgeStream, None, _ONE, "manage_stream", BROADCAST,
          "DELETE /streams/{stream_id}/purge"),
    _spec(get_topic.GetTopic, TopicDetails, _OPT, "read_topic", GATHER, f"GET {_ST}"),
    _spec(get_topics.GetTopics, TopicHeader, _LIST, "list_topics", GATHER,
          "GET /streams/{stream_id}/topics"),
    _spec(create_topic.CreateTopic, TopicDetails, _ONE, "create_topic", META,
          "POST /streams/{stream_id}/topics"),
    _spec(delete_topic.DeleteTopic, None, _ONE, "manage_topic", META, f"DELETE {_ST}"),
    _spec(update_topic.UpdateTopic, None, _ONE, "manage_topic", META, f"PUT {_ST}"),
    _spec(purge_topic.PurgeTopic, None, _ONE, "manage_topic", BROADCAST, f"DELETE {_ST}/purge"),
    _spec(create_partitions.CreatePartitions, None, _ONE, "manage_topic", META,
          f"POST {_ST}/partitions"),
    _spec(delete_partitions.DeletePartitions, None, _ONE, "manage_topic", META,
          f"DELETE {_ST}/partitions"),
    _spec(delete_segments.DeleteSegments, None, _ONE, "manage_topic", PARTITION,
          f"DELETE {_ST}/partitions/{{partition_id}}"),
    _spec(cg_get.GetConsumerGroup, GroupDetails, _OPT, "read_topic", LOCAL,
          f"GET {_ST}/consumer-groups/{{group_id}}"),
    _spec(cg_get_all.GetConsumerGroups, GroupHeader, _LIST, "read_topic", LOCAL,
          f"GET {_ST}/consumer-groups"),
    _spec(cg_create.CreateConsumerGroup, GroupDetails, _ONE, "read_topic", META,
          f"POST {_ST}/consumer-groups"),
    _spec(cg_delete.DeleteConsumerGroup, None, _ONE, "read_topic", META,
          f"DELETE {_ST}/consumer-groups/{{group_id}}"),
    _spec(cg_join.JoinConsumerGroup, None, _ONE, "read_topic", META),
    _spec(cg_leave.LeaveConsumerGroup, None, _ONE, "read_topic", META),
]

COMMANDS: dict[int, CommandSpec] = {spec.code: spec for spec in _SPECS}
by_name: dict[str, CommandSpec] = {spec.name: spec for spec in COMMANDS.values()}
assert len(COMMANDS) == len(_SPECS) == len(by_name)
assert all(spec.routing in ROUTING_KINDS for spec in _SPECS)


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
