"""The JSON shapes of the HTTP API (wire §14.2), both ways, over the ``core.wire`` values.

Sans-IO and shared by the server (``to_json``: response value -> JSON-able dict) and the
SDK's HTTP connection (``from_json``: dict -> response value). Field names are exactly the
Iggy 0.8 ones. Invariants: ``from_json(type, to_json(v)) == v`` for every response value
(sizes are written as exact decimal byte strings, ``"1.234567 MB"``, which parse back to the
same integer); timestamps and durations are integer microseconds; ``u64::MAX`` expiry
means never. Only ``core.wire`` and ``msgspec`` are imported here.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from lurcher.core.wire import units
from lurcher.core.wire.buffer import U32_MAX, U128_MAX
from lurcher.core.wire.units import U64_MAX
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.headers import HeaderKind, HeaderValue, decode_headers, encode_headers
from lurcher.core.wire.responses.clients import ClientDetails, ClientGroup, ClientHeader
from lurcher.core.wire.responses.cluster import ClusterMetadata, ClusterNode, NodeRole, NodeStatus
from lurcher.core.wire.responses.consumer_groups import GroupDetails, GroupHeader, GroupMember
from lurcher.core.wire.responses.consumer_offsets import ConsumerOffsetInfo
from lurcher.core.wire.responses.identity import IdentityInfo
from lurcher.core.wire.responses.messages import Message, PolledMessages
from lurcher.core.wire.responses.personal_access_tokens import PatInfo, RawToken
from lurcher.core.wire.responses.stats import CacheMetric, Stats
from lurcher.core.wire.responses.streams import StreamDetails, StreamHeader
from lurcher.core.wire.responses.topics import PartitionInfo, TopicDetails, TopicHeader
from lurcher.core.wire.responses.users import UserDetails, UserHeader
from lurcher.core.wire.values.permissions import (
    GlobalPermissions,
    Permissions,
    StreamPermissions,
    TopicPermissions,
)

NOT_LOGGED_IN = 0xFFFF_FFFF

# -- scalars ----------------------------------------------------------------------------------
_DECIMAL_UNITS = ("B", "KB", "MB", "GB", "TB", "PB", "EB")


def size_text(n: int) -> str:
    """Bytes as an exact human string in decimal units: 0 -> "0 B", 1234 -> "1.234 KB"."""
    unit = 0
    while unit + 1 < len(_DECIMAL_UNITS) and n >= 1000 ** (unit + 1):
        unit += 1
    if unit == 0:
        return f"{n} B"
    value = format(Decimal(n) / Decimal(1000 ** unit), "f").rstrip("0").rstrip(".")
    return f"{value} {_DECIMAL_UNITS[unit]}"


def parse_size(value: Any) -> int:
    """An integer byte count or a size string ("1 GB", "1.5 KiB", "unlimited").

    Raises IggyError INVALID_FORMAT."""
    if isinstance(value, (int, str)):
        try:
            return units.parse_size(value)
        except ValueError:
            pass
    raise IggyError(ErrorCode.INVALID_FORMAT, f"not a size: {value!r}")


def b64(data: bytes | memoryview) -> str:
    return base64.b64encode(bytes(data)).decode("ascii")


def unb64(text: Any, what: str) -> bytes:
    """Raises IggyError INVALID_FORMAT for a non-string or invalid base64."""
    if not isinstance(text, str):
        raise IggyError(ErrorCode.INVALID_FORMAT, f"{what}: expected a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise IggyError(ErrorCode.INVALID_FORMAT, f"{what}: invalid base64") from None


def message_id(value: Any) -> int:
    """A message id from an int, a decimal string or a UUID string. Raises IggyError."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 128:
        return value
    if isinstance(value, str):
        number = units.decimal(value, U128_MAX)
        if number is not None:
            return number
        try:
            return uuid.UUID(value).int
        except ValueError:
            pass
    if value is None:
        return 0
    raise IggyError(ErrorCode.INVALID_FORMAT, f"invalid message id {units.shown(value)}")


COMPRESSION_NAMES = {1: "none", 2: "gzip"}
COMPRESSION_CODES = {name: code for code, name in COMPRESSION_NAMES.items()}
USER_STATUS_NAMES = {1: "active", 2: "inactive"}
USER_STATUS_CODES = {name: code for code, name in USER_STATUS_NAMES.items()}
TRANSPORT_NAMES = {1: "tcp", 2: "quic", 3: "http", 4: "ws"}
TRANSPORT_CODES = {name: code for code, name in TRANSPORT_NAMES.items()}
ROLE_NAMES = {r.value: r.name.lower() for r in NodeRole}
STATUS_NAMES = {s.value: s.name.lower() for s in NodeStatus}
HEADER_KIND_NAMES = {k.value: k.name.lower() for k in HeaderKind}
HEADER_KIND_CODES = {name: code for code, name in HEADER_KIND_NAMES.items()}


def lookup(table: dict[Any, Any], key: Any, what: str) -> Any:
    """``table[key]`` (strings case-insensitively). Raises IggyError INVALID_FORMAT."""
    if isinstance(key, str):
        key = key.lower()
    try:
        return table[key]
    except (KeyError, TypeError):
        raise IggyError(ErrorCode.INVALID_FORMAT, f"invalid {what}: {key!r}") from None


# -- permissions ------------------------------------------------------------------------------
def _flags(value: Any) -> dict[str, bool]:
    return {f: getattr(value, f) for f in value.__struct_fields__ if f != "topics"}


def permissions_json(p: Permissions | None) -> dict[str, Any] | None:
    if p is None:
        return None
    streams = {str(sid): {**_flags(s), "topics": ({str(tid): _flags(t) for tid, t in
                                                   sorted(s.topics.items())} or None)}
               for sid, s in sorted(p.streams.items())}
    return {"global": _flags(p.global_), "streams": streams or None}


def _bools(cls: type, data: Any, what: str) -> dict[str, bool]:
    if not isinstance(data, dict):
        raise IggyError(ErrorCode.INVALID_FORMAT, f"{what}: expected an object")
    names = [f for f in cls.__struct_fields__ if f != "topics"]
    return {f: bool(data.get(f, False)) for f in names}


def _id_map(data: Any, what: str) -> dict[int, Any]:
    if data is None:
        return {}
    ids = {k: units.decimal(str(k), U32_MAX) for k in data} if isinstance(data, dict) else {}
    if not isinstance(data, dict) or None in ids.values():
        raise IggyError(ErrorCode.INVALID_FORMAT, f"{what}: expected an object keyed by ids")
    return {ids[k]: v for k, v in data.items()}


def permissions_from_json(data: Any) -> Permissions | None:
    """Raises IggyError INVALID_FORMAT."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise IggyError(ErrorCode.INVALID_FORMAT, "permissions: expected an object")
    streams = {}
    for sid, s in _id_map(data.get("streams"), "permissions.streams").items():
        topics = {tid: TopicPermissions(**_bools(TopicPermissions, t, "topic permissions"))
                  for tid, t in _id_map((s or {}).get("topics"), "topics").items()}
        streams[sid] = StreamPermissions(**_bools(StreamPermissions, s, "stream permissions"),
                                         topics=topics)
    return Permissions(GlobalPermissions(**_bools(GlobalPermissions, data.get("global", {}),
                                                  "global permissions")), streams)


# -- user headers -----------------------------------------------------------------------------
def _field_json(field: HeaderValue) -> dict[str, str]:
    return {"kind": HEADER_KIND_NAMES.get(field.kind, "raw"), "value": b64(field.value)}


def headers_json(block: bytes | memoryview) -> list[dict[str, Any]] | str:
    """Entries for a raw block; the base64 block itself if it does not parse."""
    if not len(block):
        return []
    try:
        parsed = decode_headers(block)
    except IggyError:
        return b64(block)
    return [{"key": _field_json(k), "value": _field_json(v)} for k, v in parsed.items()]


def _field_from_json(data: Any, what: str) -> HeaderValue:
    if not isinstance(data, dict):
        raise IggyError(ErrorCode.INVALID_FORMAT, f"{what}: expected {{kind, value}}")
    return HeaderValue(lookup(HEADER_KIND_CODES, data.get("kind"), f"{what} kind"),
                       unb64(data.get("value"), f"{what} value"))


def headers_from_json(data: Any) -> bytes:
    """A raw block from entries, a base64 block or null. Raises IggyError."""
    if data is None:
        return b""
    if isinstance(data, str):
        return unb64(data, "user_headers")
    if not isinstance(data, list):
        raise IggyError(ErrorCode.INVALID_FORMAT, "user_headers: expected a list")
    pairs = {}
    for entry in data:
        if not isinstance(entry, dict):
            raise IggyError(ErrorCode.INVALID_FORMAT, "user_headers: expected {key, value}")
        pairs[_field_from_json(entry.get("key"), "header key")] = _field_from_json(
            entry.get("value"), "header value")
    return encode_headers(pairs) if pairs else b""


# -- messages ---------------------------------------------------------------------------------
def message_json(m: Message) -> dict[str, Any]:
    header = {"checksum": m.checksum, "id": m.id, "offset": m.offset, "timestamp": m.timestamp,
              "origin_timestamp": m.origin_timestamp,
              "user_headers_length": len(m.user_headers), "payload_length": len(m.payload),
              "reserved": m.reserved}
    return {"header": header, "payload": b64(m.payload),
            "user_headers": headers_json(m.user_headers)}


def message_from_json(data: dict[str, Any]) -> Message:
    h = data["header"]
    return Message(h["checksum"], h["id"], h["offset"], h["timestamp"], h["origin_timestamp"],
                   unb64(data["payload"], "payload"), headers_from_json(data.get("user_headers")),
                   h.get("reserved", 0))


def polled_json(p: PolledMessages) -> dict[str, Any]:
    return {"partition_id": p.partition_id, "current_offset": p.current_offset,
            "count": p.messages_count, "messages": [message_json(m) for m in p.messages()]}


def polled_from_json(d: dict[str, Any]) -> PolledMessages:
    messages = [message_from_json(m) for m in d.get("messages", [])]
    out = PolledMessages.of(d["partition_id"], d["current_offset"], messages)
    return out


# -- resources --------------------------------------------------------------------------------
def partition_json(p: PartitionInfo) -> dict[str, Any]:
    return {"id": p.id, "created_at": p.created_at, "segments_count": p.segments_count,
            "current_offset": p.current_offset, "size": size_text(p.size_bytes),
            "messages_count": p.messages_count}


def partition_from_json(d: dict[str, Any]) -> PartitionInfo:
    return PartitionInfo(d["id"], d["created_at"], d["segments_count"], d["current_offset"],
                         parse_size(d["size"]), d["messages_count"])


def topic_json(t: TopicHeader) -> dict[str, Any]:
    return {"id": t.id, "created_at": t.created_at, "name": t.name,
            "size": size_text(t.size_bytes), "message_expiry": t.message_expiry_us,
            "compression_algorithm": COMPRESSION_NAMES.get(t.compression, "none"),
            "max_topic_size": t.max_topic_size_bytes,
            "replication_factor": t.replication_factor, "messages_count": t.messages_count,
            "partitions_count": t.partitions_count}


def topic_from_json(d: dict[str, Any]) -> TopicHeader:
    return TopicHeader(d["id"], d["created_at"], d["partitions_count"], d["message_expiry"],
                       lookup(COMPRESSION_CODES, d["compression_algorithm"], "compression"),
                       parse_size(d["max_topic_size"]), d.get("replication_factor") or 0,
                       parse_size(d["size"]), d["messages_count"], d["name"])


def topic_details_json(t: TopicDetails) -> dict[str, Any]:
    return {**topic_json(t.header), "partitions": [partition_json(p) for p in t.partitions]}


def topic_details_from_json(d: dict[str, Any]) -> TopicDetails:
    return TopicDetails(topic_from_json(d), [partition_from_json(p) for p in d["partitions"]])


def stream_json(s: StreamHeader) -> dict[str, Any]:
    return {"id": s.id, "created_at": s.created_at, "name": s.name,
            "size": size_text(s.size_bytes), "messages_count": s.messages_count,
            "topics_count": s.topics_count}


def stream_from_json(d: dict[str, Any]) -> StreamHeader:
    return StreamHeader(d["id"], d["created_at"], d["topics_count"], parse_size(d["size"]),
                        d["messages_count"], d["name"])


def stream_details_json(s: StreamDetails) -> dict[str, Any]:
    return {**stream_json(s.header), "topics": [topic_json(t) for t in s.topics]}


def stream_details_from_json(d: dict[str, Any]) -> StreamDetails:
    return StreamDetails(stream_from_json(d), [topic_from_json(t) for t in d["topics"]])


def group_json(g: GroupHeader) -> dict[str, Any]:
    return {"id": g.id, "name": g.name, "partitions_count": g.partitions_count,
            "members_count": g.members_count}


def group_from_json(d: dict[str, Any]) -> GroupHeader:
    return GroupHeader(d["id"], d["partitions_count"], d["members_count"], d["name"])


def group_details_json(g: GroupDetails) -> dict[str, Any]:
    members = [{"id": m.id, "partitions_count": len(m.partitions), "partitions": m.partitions}
               for m in g.members]
    return {**group_json(g.header), "members_count": len(g.members), "members": members}


def group_details_from_json(d: dict[str, Any]) -> GroupDetails:
    return GroupDetails(group_from_json(d), [GroupMember(m["id"], list(m["partitions"]))
                                             for m in d.get("members", [])])


def offset_json(o: ConsumerOffsetInfo) -> dict[str, Any]:
    return {"partition_id": o.partition_id, "current_offset": o.current_offset,
            "stored_offset": o.stored_offset}


def offset_from_json(d: dict[str, Any]) -> ConsumerOffsetInfo:
    return ConsumerOffsetInfo(d["partition_id"], d["current_offset"], d["stored_offset"])


def user_json(u: UserHeader) -> dict[str, Any]:
    return {"id": u.id, "created_at": u.created_at,
            "status": USER_STATUS_NAMES.get(u.status, "inactive"), "username": u.username}


def user_from_json(d: dict[str, Any]) -> UserHeader:
    return UserHeader(d["id"], d["created_at"], lookup(USER_STATUS_CODES, d["status"], "status"),
                      d["username"])


def user_details_json(u: UserDetails) -> dict[str, Any]:
    return {**user_json(u.header), "permissions": permissions_json(u.permissions)}


def user_details_from_json(d: dict[str, Any]) -> UserDetails:
    return UserDetails(user_from_json(d), permissions_from_json(d.get("permissions")))


def pat_json(p: PatInfo) -> dict[str, Any]:
    return {"name": p.name, "expiry_at": p.expiry_at or None}


def pat_from_json(d: dict[str, Any]) -> PatInfo:
    return PatInfo(d["name"], d.get("expiry_at") or 0)


def raw_token_json(t: RawToken) -> dict[str, Any]:
    return {"token": t.token}


def raw_token_from_json(d: dict[str, Any]) -> RawToken:
    return RawToken(d["token"])


def client_json(c: ClientHeader) -> dict[str, Any]:
    return {"client_id": c.client_id,
            "user_id": None if c.user_id == NOT_LOGGED_IN else c.user_id,
            "address": c.address, "transport": TRANSPORT_NAMES.get(c.transport, "tcp"),
            "consumer_groups_count": c.consumer_groups_count}


def client_from_json(d: dict[str, Any]) -> ClientHeader:
    user = d.get("user_id")
    return ClientHeader(d["client_id"], NOT_LOGGED_IN if user is None else user,
                        lookup(TRANSPORT_CODES, d["transport"], "transport"), d["address"],
                        d["consumer_groups_count"])


def client_details_json(c: ClientDetails) -> dict[str, Any]:
    groups = [{"stream_id": g.stream_id, "topic_id": g.topic_id, "group_id": g.group_id}
              for g in c.consumer_groups]
    return {**client_json(c.header), "consumer_groups_count": len(groups),
            "consumer_groups": groups}


def client_details_from_json(d: dict[str, Any]) -> ClientDetails:
    return ClientDetails(client_from_json(d), [
        ClientGroup(g["stream_id"], g["topic_id"], g["group_id"])
        for g in d.get("consumer_groups", [])])


def cluster_json(c: ClusterMetadata) -> dict[str, Any]:
    nodes = [{"name": n.name, "ip": n.ip,
              "endpoints": {"tcp": n.tcp_port, "quic": n.quic_port, "http": n.http_port,
                            "websocket": n.websocket_port},
              "role": ROLE_NAMES.get(n.role, "leader"),
              "status": STATUS_NAMES.get(n.status, "unknown")} for n in c.nodes]
    return {"name": c.name, "nodes": nodes}


def cluster_from_json(d: dict[str, Any]) -> ClusterMetadata:
    roles = {v: k for k, v in ROLE_NAMES.items()}
    statuses = {v: k for k, v in STATUS_NAMES.items()}
    nodes = [ClusterNode(n["name"], n["ip"], n["endpoints"]["tcp"], n["endpoints"]["quic"],
                         n["endpoints"]["http"], n["endpoints"]["websocket"],
                         roles.get(n["role"], 0), statuses.get(n["status"], 5))
             for n in d["nodes"]]
    return ClusterMetadata(d["name"], nodes)


_STAT_SIZES = ("memory_usage", "total_memory", "available_memory", "read_bytes",
               "written_bytes", "messages_size_bytes", "free_disk_space", "total_disk_space")
_STAT_FIELDS = {"memory_usage": "memory_usage_bytes", "total_memory": "total_memory_bytes",
                "available_memory": "available_memory_bytes", "run_time": "run_time_us",
                "start_time": "start_time_us", "free_disk_space": "free_disk_space_bytes",
                "total_disk_space": "total_disk_space_bytes"}
_STAT_PLAIN = ("process_id", "cpu_usage", "total_cpu_usage", "streams_count", "topics_count",
               "partitions_count", "segments_count", "messages_count", "clients_count",
               "consumer_groups_count", "hostname", "os_name", "os_version", "kernel_version",
               "iggy_server_version", "threads_count")


def stats_json(s: Stats) -> dict[str, Any]:
    out: dict[str, Any] = {name: getattr(s, name) for name in _STAT_PLAIN}
    for name in ("run_time", "start_time", *_STAT_SIZES):
        value = getattr(s, _STAT_FIELDS.get(name, name))
        out[name] = size_text(value) if name in _STAT_SIZES else value
    out["iggy_server_semver"] = s.iggy_server_semver or None
    out["cache_metrics"] = {f"{m.stream_id}-{m.topic_id}-{m.partition_id}":
                            {"hits": m.hits, "misses": m.misses, "hit_ratio": m.hit_ratio}
                            for m in s.cache_metrics}
    return out


def stats_from_json(d: dict[str, Any]) -> Stats:
    fields: dict[str, Any] = {name: d[name] for name in _STAT_PLAIN if name in d}
    for name in ("run_time", "start_time", *_STAT_SIZES):
        if name in d:
            value = parse_size(d[name]) if name in _STAT_SIZES else d[name]
            fields[_STAT_FIELDS.get(name, name)] = value
    fields["iggy_server_semver"] = d.get("iggy_server_semver") or 0
    metrics = []
    for key, m in (d.get("cache_metrics") or {}).items():
        sid, tid, pid = (int(x) for x in key.split("-"))
        metrics.append(CacheMetric(sid, tid, pid, m["hits"], m["misses"], m["hit_ratio"]))
    return Stats(**fields, cache_metrics=metrics)


def identity_json(i: IdentityInfo, token: str | None = None,
                  expiry_s: int = 0) -> dict[str, Any]:
    access = {"token": token, "expiry": expiry_s} if token is not None else None
    return {"user_id": i.user_id, "access_token": access}


def identity_from_json(d: dict[str, Any]) -> IdentityInfo:
    return IdentityInfo(d["user_id"])


# -- dispatch tables --------------------------------------------------------------------------
TO_JSON: dict[type, Callable[[Any], dict[str, Any]]] = {
    StreamHeader: stream_json, StreamDetails: stream_details_json,
    TopicHeader: topic_json, TopicDetails: topic_details_json, PartitionInfo: partition_json,
    GroupHeader: group_json, GroupDetails: group_details_json,
    ConsumerOffsetInfo: offset_json, UserHeader: user_json, UserDetails: user_details_json,
    PatInfo: pat_json, RawToken: raw_token_json, ClientHeader: client_json,
    ClientDetails: client_details_json, ClusterMetadata: cluster_json, Stats: stats_json,
    PolledMessages: polled_json, IdentityInfo: identity_json,
}
FROM_JSON: dict[type, Callable[[dict[str, Any]], Any]] = {
    StreamHeader: stream_from_json, StreamDetails: stream_details_from_json,
    TopicHeader: topic_from_json, TopicDetails: topic_details_from_json,
    GroupHeader: group_from_json, GroupDetails: group_details_from_json,
    ConsumerOffsetInfo: offset_from_json, UserHeader: user_from_json,
    UserDetails: user_details_from_json, PatInfo: pat_from_json, RawToken: raw_token_from_json,
    ClientHeader: client_from_json, ClientDetails: client_details_from_json,
    ClusterMetadata: cluster_from_json, Stats: stats_from_json,
    PolledMessages: polled_from_json, IdentityInfo: identity_from_json,
}


def to_json(value: Any) -> Any:
    """A response value (or list of them) as JSON-able data."""
    if isinstance(value, list):
        return [TO_JSON[type(v)](v) for v in value]
    return TO_JSON[type(value)](value)


def from_json(kind: type, data: Any, is_list: bool = False) -> Any:
    """The response value of type ``kind`` (a list when ``is_list``).

    Raises IggyError INVALID_FORMAT for data that does not have the shape."""
    try:
        if is_list:
            return [FROM_JSON[kind](item) for item in data]
        return FROM_JSON[kind](data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise IggyError(ErrorCode.INVALID_FORMAT,
                        f"unexpected JSON for {kind.__name__}: {exc!r}") from None


# -- errors -----------------------------------------------------------------------------------
ERROR_FIELDS = {
    ErrorCode.STREAM_ID_NOT_FOUND: "stream_id", ErrorCode.TOPIC_ID_NOT_FOUND: "topic_id",
    ErrorCode.PARTITION_NOT_FOUND: "partition_id", ErrorCode.SEGMENT_NOT_FOUND: "segment_id",
    ErrorCode.CLIENT_NOT_FOUND: "client_id", ErrorCode.USER_ALREADY_EXISTS: "username",
    ErrorCode.INVALID_STREAM_NAME: "name", ErrorCode.STREAM_NAME_ALREADY_EXISTS: "name",
    ErrorCode.INVALID_TOPIC_NAME: "name", ErrorCode.TOPIC_NAME_ALREADY_EXISTS: "name",
    ErrorCode.CONSUMER_GROUP_NAME_ALREADY_EXISTS: "name",
    ErrorCode.PERSONAL_ACCESS_TOKEN_ALREADY_EXISTS: "name",
}
NOT_FOUND_STATUS = frozenset({
    ErrorCode.STREAM_ID_NOT_FOUND, ErrorCode.TOPIC_ID_NOT_FOUND, ErrorCode.PARTITION_NOT_FOUND,
    ErrorCode.SEGMENT_NOT_FOUND, ErrorCode.CLIENT_NOT_FOUND,
    ErrorCode.CONSUMER_GROUP_ID_NOT_FOUND, ErrorCode.CONSUMER_GROUP_NAME_NOT_FOUND,
    ErrorCode.CONSUMER_GROUP_MEMBER_NOT_FOUND, ErrorCode.CONSUMER_OFFSET_NOT_FOUND,
    ErrorCode.RESOURCE_NOT_FOUND,
})
UNAUTHENTICATED_STATUS = frozenset({
    ErrorCode.UNAUTHENTICATED, ErrorCode.ACCESS_TOKEN_MISSING, ErrorCode.INVALID_ACCESS_TOKEN,
    ErrorCode.INVALID_PERSONAL_ACCESS_TOKEN,
})
RESOURCE_NOT_FOUND_JSON = {"id": 404, "code": "not_found", "reason": "Resource not found",
                           "field": None}


def http_status(code: int) -> int:
    """The HTTP status for an Iggy error code (wire §14)."""
    if code in NOT_FOUND_STATUS:
        return 404
    if code in UNAUTHENTICATED_STATUS:
        return 401
    if code == ErrorCode.UNAUTHORIZED:
        return 403
    return 400


def error_json(code: int, detail: str | None = None) -> dict[str, Any]:
    known = ErrorCode.of(code) if code in ErrorCode._value2member_map_ else None
    return {"id": int(code), "code": known.snake_name if known else "error",
            "reason": detail or (known.reason if known else "Error"),
            "field": ERROR_FIELDS.get(code)}
