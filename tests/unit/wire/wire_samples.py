"""Sample values for every wire codec type, shared by the wire unit tests.

``REQUESTS``: at least one value per request type (every command code). ``VALUES``: response
and sub-value samples. ``LISTS``: list-form responses. ``TAIL_START``: for types whose last
field is "the rest of the buffer", how many leading bytes are mandatory.
"""

from __future__ import annotations

from lurcher.core.wire.batch import MessageBatch
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.consumer_groups.create_consumer_group import CreateConsumerGroup
from lurcher.core.wire.requests.consumer_groups.delete_consumer_group import DeleteConsumerGroup
from lurcher.core.wire.requests.consumer_groups.get_consumer_group import GetConsumerGroup
from lurcher.core.wire.requests.consumer_groups.get_consumer_groups import GetConsumerGroups
from lurcher.core.wire.requests.consumer_groups.join_consumer_group import JoinConsumerGroup
from lurcher.core.wire.requests.consumer_groups.leave_consumer_group import LeaveConsumerGroup
from lurcher.core.wire.requests.consumer_offsets.delete_consumer_offset import DeleteConsumerOffset
from lurcher.core.wire.requests.consumer_offsets.get_consumer_offset import GetConsumerOffset
from lurcher.core.wire.requests.consumer_offsets.store_consumer_offset import StoreConsumerOffset
from lurcher.core.wire.requests.messages.flush_unsaved_buffer import FlushUnsavedBuffer
from lurcher.core.wire.requests.messages.poll_messages import PollMessages
from lurcher.core.wire.requests.messages.send_messages import SendMessages
from lurcher.core.wire.requests.partitions.create_partitions import CreatePartitions
from lurcher.core.wire.requests.partitions.delete_partitions import DeletePartitions
from lurcher.core.wire.requests.pat.create_personal_access_token import CreatePersonalAccessToken
from lurcher.core.wire.requests.pat.delete_personal_access_token import DeletePersonalAccessToken
from lurcher.core.wire.requests.pat.get_personal_access_tokens import GetPersonalAccessTokens
from lurcher.core.wire.requests.pat.login_with_personal_access_token import (
    LoginWithPersonalAccessToken,
)
from lurcher.core.wire.requests.segments.delete_segments import DeleteSegments
from lurcher.core.wire.requests.streams.create_stream import CreateStream
from lurcher.core.wire.requests.streams.delete_stream import DeleteStream
from lurcher.core.wire.requests.streams.get_stream import GetStream
from lurcher.core.wire.requests.streams.get_streams import GetStreams
from lurcher.core.wire.requests.streams.purge_stream import PurgeStream
from lurcher.core.wire.requests.streams.update_stream import UpdateStream
from lurcher.core.wire.requests.system.get_client import GetClient
from lurcher.core.wire.requests.system.get_clients import GetClients
from lurcher.core.wire.requests.system.get_cluster_metadata import GetClusterMetadata
from lurcher.core.wire.requests.system.get_me import GetMe
from lurcher.core.wire.requests.system.get_snapshot_file import GetSnapshotFile
from lurcher.core.wire.requests.system.get_stats import GetStats
from lurcher.core.wire.requests.system.ping import Ping
from lurcher.core.wire.requests.topics.create_topic import CreateTopic
from lurcher.core.wire.requests.topics.delete_topic import DeleteTopic
from lurcher.core.wire.requests.topics.get_topic import GetTopic
from lurcher.core.wire.requests.topics.get_topics import GetTopics
from lurcher.core.wire.requests.topics.purge_topic import PurgeTopic
from lurcher.core.wire.requests.topics.update_topic import UpdateTopic
from lurcher.core.wire.requests.users.change_password import ChangePassword
from lurcher.core.wire.requests.users.create_user import CreateUser
from lurcher.core.wire.requests.users.delete_user import DeleteUser
from lurcher.core.wire.requests.users.get_user import GetUser
from lurcher.core.wire.requests.users.get_users import GetUsers
from lurcher.core.wire.requests.users.login_user import LoginUser
from lurcher.core.wire.requests.users.logout_user import LogoutUser
from lurcher.core.wire.requests.users.update_permissions import UpdatePermissions
from lurcher.core.wire.requests.users.update_user import UpdateUser
from lurcher.core.wire.responses.clients import ClientDetails, ClientGroup, ClientHeader
from lurcher.core.wire.responses.cluster import ClusterMetadata, ClusterNode
from lurcher.core.wire.responses.consumer_groups import GroupDetails, GroupHeader, GroupMember
from lurcher.core.wire.responses.consumer_offsets import ConsumerOffsetInfo
from lurcher.core.wire.responses.identity import IdentityInfo
from lurcher.core.wire.responses.messages import Message, PolledMessages
from lurcher.core.wire.responses.personal_access_tokens import PatInfo, RawToken
from lurcher.core.wire.responses.snapshot import SnapshotFile
from lurcher.core.wire.responses.stats import CacheMetric, Stats
from lurcher.core.wire.responses.streams import StreamDetails, StreamHeader
from lurcher.core.wire.responses.topics import PartitionInfo, TopicDetails, TopicHeader
from lurcher.core.wire.responses.users import UserDetails, UserHeader
from lurcher.core.wire.values import (
    Consumer,
    GlobalPermissions,
    Partitioning,
    Permissions,
    PollingStrategy,
    StreamPermissions,
    TopicPermissions,
)

U32_MAX = 0xFFFF_FFFF
U64_MAX = 0xFFFF_FFFF_FFFF_FFFF
LONG = "x" * 255
UNICODE = "strém-ü-流"

N0, N7, NMAX = Identifier(0), Identifier(7), Identifier(U32_MAX)
S1, T1, G1 = Identifier("s1"), Identifier("t1"), Identifier("g1")
SLONG, SDIGITS = Identifier(LONG), Identifier("123")

PERMS = Permissions(
    GlobalPermissions(True, False, True, False, True, False, True, False, True, False),
    {9: StreamPermissions(True, True, topics={5: TopicPermissions(True), 2: TopicPermissions(
        False, True, True, True)}), 1: StreamPermissions(send_messages=True)})


def message(payload: bytes, headers: bytes = b"", **fields: int) -> Message:
    return Message(payload=payload, user_headers=headers, **fields)


def raw_batch(messages: list[Message]) -> MessageBatch:
    """A batch built from raw bytes, as a client sends it (index: 0, end position, 0)."""
    blob = Message.encode_list(messages)
    index, end = bytearray(), 0
    for m in messages:
        end += m.size_bytes
        index += (0).to_bytes(4, "little") + end.to_bytes(4, "little") + bytes(8)
    return MessageBatch(len(messages), memoryview(bytes(index)), memoryview(blob))


BATCH = raw_batch([message(b"hello", origin_timestamp=1_700_000_000_000_000),
                   message(b"\x00\x01\x02", b"\x02\x01\x00\x00\x00k\x02\x01\x00\x00\x00v",
                           id=(1 << 127) + 5)])

REQUESTS = [
    Ping(), GetStats(), GetClusterMetadata(), GetMe(), GetClients(),
    GetSnapshotFile(2, [1, 2, 6]), GetSnapshotFile(1, []), GetSnapshotFile(9, [100]),
    GetClient(1), GetClient(U32_MAX),
    GetUser(N0), GetUser(Identifier("iggy")), GetUsers(), DeleteUser(N7),
    CreateUser("user1", "secret"), CreateUser("ü" * 20, "", 2, PERMS),
    CreateUser("u", "p" * 255, 1, Permissions()),
    UpdateUser(N0), UpdateUser(S1, "renamed"), UpdateUser(N7, None, 2), UpdateUser(N7, "x", 1),
    UpdatePermissions(N0), UpdatePermissions(S1, PERMS), UpdatePermissions(N7, Permissions.root()),
    ChangePassword(N0, "old", "new"), ChangePassword(SLONG, "", UNICODE),
    LoginUser("iggy", "iggy", "0.10.0"), LoginUser("iggy", "", None, None),
    LoginUser(UNICODE, "p", "v", "ctx" * 100), LogoutUser(),
    GetPersonalAccessTokens(), CreatePersonalAccessToken("tok", 0),
    CreatePersonalAccessToken(LONG, U64_MAX), DeletePersonalAccessToken("tok"),
    LoginWithPersonalAccessToken("iggypat-token123"),
    PollMessages(Consumer.of(0), S1, T1, 0, PollingStrategy.offset(0), 10, False),
    PollMessages(Consumer.of("g1", group=True), N0, NMAX, None, PollingStrategy.next(), 1000, True),
    PollMessages(Consumer.of(LONG), SDIGITS, T1, U32_MAX, PollingStrategy.timestamp(U64_MAX), 0),
    SendMessages(S1, T1, Partitioning.partition(0), BATCH),
    SendMessages(N0, SLONG, Partitioning.balanced(), raw_batch([message(b"")])),
    SendMessages(N7, N0, Partitioning.messages_key(b"k" * 255), BATCH),
    SendMessages(N7, N0, Partitioning(3, b""), raw_batch([])),
    FlushUnsavedBuffer(S1, T1, 0, True), FlushUnsavedBuffer(N0, NMAX, U32_MAX, False),
    GetConsumerOffset(Consumer.of(1), S1, T1, None),
    StoreConsumerOffset(Consumer.of("g1", group=True), S1, T1, 0, 2),
    StoreConsumerOffset(Consumer.of(U32_MAX), N0, N0, U32_MAX, U64_MAX),
    DeleteConsumerOffset(Consumer.of("c", group=True), NMAX, SLONG, 3),
    GetStream(N0), GetStream(S1), GetStreams(), CreateStream("s1"), CreateStream(LONG),
    CreateStream(UNICODE), DeleteStream(SLONG), UpdateStream(N0, "new"), PurgeStream(NMAX),
    GetTopic(S1, T1), GetTopics(N0), DeleteTopic(N0, N7), PurgeTopic(SDIGITS, SLONG),
    CreateTopic(S1, 2, 1, 0, 0, 0, "t1"),
    CreateTopic(N0, U32_MAX, 255, U64_MAX, U64_MAX, 255, LONG),
    UpdateTopic(S1, T1, 2, 60_000_000, 1_000_000, 1, "t2"),
    CreatePartitions(S1, T1, 3), DeletePartitions(N0, N0, 1), DeleteSegments(S1, T1, 0, 2),
    GetConsumerGroup(S1, T1, G1), GetConsumerGroups(S1, T1), CreateConsumerGroup(S1, T1, "g1"),
    DeleteConsumerGroup(N0, N0, N0), JoinConsumerGroup(S1, T1, G1),
    LeaveConsumerGroup(S1, N7, NMAX),
]

TOPIC = TopicHeader(3, 1_700_000_000_000_000, 2, U64_MAX, 1, U64_MAX, 1, 1024, 7, "t1")
GROUP = GroupHeader(0, 3, 2, "g1")

VALUES = [
    # sub-values
    Consumer.of(0), Consumer.of("g1", group=True), Partitioning.balanced(),
    Partitioning.partition(U32_MAX), Partitioning.messages_key("key"), PollingStrategy.first(),
    PollingStrategy.last(), PollingStrategy.offset(U64_MAX), Permissions(),
    Permissions.root(), PERMS,
    # responses
    IdentityInfo(0), IdentityInfo(U32_MAX), RawToken("a" * 68), PatInfo("tok", 0),
    PatInfo(LONG, U64_MAX), ConsumerOffsetInfo(0, 10, 2), ConsumerOffsetInfo(U32_MAX, U64_MAX, 0),
    StreamHeader(0, 1, 0, 0, 0, "s1"), StreamDetails(StreamHeader(1, 2, 1, 3, 4, UNICODE), [TOPIC]),
    StreamDetails(StreamHeader(0, 0, 0, 0, 0, LONG), []),
    TOPIC, PartitionInfo(0, 1, 2, 3, 4, 5), PartitionInfo(U32_MAX, U64_MAX, 0, U64_MAX, 0, U64_MAX),
    TopicDetails(TOPIC, [PartitionInfo(0, 1, 1, 9, 100, 10), PartitionInfo(1, 1, 0, 0, 0, 0)]),
    TopicDetails(TopicHeader(0, 0, 0, 0, 2, 0, 0, 0, 0, LONG), []),
    GROUP, GroupMember(0, []), GroupMember(4, [0, 2, U32_MAX]),
    GroupDetails(GROUP, [GroupMember(0, [0, 2]), GroupMember(1, [1])]),
    GroupDetails(GroupHeader(1, 0, 0, "g2")),
    UserHeader(0, 1_700_000_000_000_000, 1, "iggy"), UserDetails(UserHeader(1, 0, 2, "bob")),
    UserDetails(UserHeader(0, 5, 1, "root"), Permissions.root()),
    UserDetails(UserHeader(2, 5, 1, UNICODE), PERMS),
    ClientHeader(1, U32_MAX, 1, "127.0.0.1:5555", 0), ClientGroup(1, 2, 3),
    ClientDetails(ClientHeader(2, 0, 4, "[::1]:1", 2),
                  [ClientGroup(0, 0, 0), ClientGroup(1, 2, 3)]),
    ClientDetails(ClientHeader(3, 0, 2, "", 0)),
    ClusterNode("iggy-node", "127.0.0.1", 8090, 8080, 3000, 8092),
    ClusterMetadata("single-node", [ClusterNode("n", "::1", 1, 2, 3, 4, 1, 5)]),
    ClusterMetadata("", []),
    CacheMetric(1, 2, 3, 4, 5, 0.5), Stats(),
    Stats(1, 0.25, 1.5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, "host", "Linux",
          "6.1", "6.1.0-x", "0.8.0", 8000, [CacheMetric(0, 0, 0, 1, 1, 0.5)] * 2, 4, U64_MAX, 0),
    Message(), message(b"payload", b"\x02\x01\x00\x00\x00k\x02\x01\x00\x00\x00v", checksum=U64_MAX,
                       id=(1 << 128) - 1, offset=5, timestamp=6, origin_timestamp=7),
    PolledMessages(0, 0, 0),
    PolledMessages.of(1, 9, [message(b"a", offset=8), message(b"bc", offset=9)]),
    SnapshotFile(b""), SnapshotFile(b"PK\x03\x04zip"),
]

LISTS = {
    StreamHeader: [StreamHeader(0, 1, 0, 0, 0, "a"), StreamHeader(1, 2, 3, 4, 5, LONG)],
    TopicHeader: [TOPIC, TopicHeader(4, 0, 0, 0, 2, 0, 0, 0, 0, "z")],
    GroupHeader: [GROUP, GroupHeader(9, 0, 0, "h")],
    UserHeader: [UserHeader(0, 1, 1, "iggy"), UserHeader(1, 2, 2, UNICODE)],
    PatInfo: [PatInfo("one", 0), PatInfo("two", U64_MAX)],
    ClientHeader: [ClientHeader(1, 0, 1, "a:1", 0), ClientHeader(2, U32_MAX, 3, "", 5)],
}


TAIL_TYPES = (PolledMessages, SnapshotFile, SendMessages)


def tail_start(value: object, encoded: bytes) -> int:
    """Bytes that must be present: prefixes shorter than this raise; longer ones may decode."""
    if isinstance(value, PolledMessages):
        return 16
    if isinstance(value, SnapshotFile):
        return 0
    if isinstance(value, SendMessages):
        return len(encoded) - len(value.batch.blob)
    return len(encoded)


def same(a: object, b: object) -> bool:
    """Equality for samples; SendMessages (batch has no __eq__) compares encodings."""
    if isinstance(a, SendMessages):
        return type(a) is type(b) and a.encode() == b.encode()  # type: ignore[attr-defined]
    return a == b
