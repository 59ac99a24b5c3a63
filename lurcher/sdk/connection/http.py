"""``HttpConnection``: the binary ``Connection`` interface carried over the REST API (§14).

The SDK speaks binary requests; this class decodes each one into its typed request
(``core.wire``), sends the matching REST call (``ROUTES``), and turns the JSON answer back
into the binary OK payload of that command, so ``Client`` works unchanged over HTTP. Login
requests keep the returned JWT and send it as ``Authorization: Bearer`` afterwards;
LogoutUser revokes it. Error answers become their Iggy status; a bare 401 becomes
UNAUTHENTICATED; a 404 "not found" for an optional resource becomes an empty OK (None).
Commands with no HTTP route (GetMe, joining/leaving groups, group polling, the snapshot
file) answer FEATURE_UNAVAILABLE without a request. TLS (``https://``) when ``config.tls``.
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx

from lurcher.core.wire.buffer import Buffer
from lurcher.core.wire.codec import REQUEST_TYPES, WireStruct
from lurcher.core.wire.commands import COMMANDS
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError, WireError
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.responses.messages import MESSAGE_HEADER, MESSAGE_HEADER_BYTES
from lurcher.core.wire.values.polling import PollingKind
from lurcher.sdk.config import ClientConfig
from lurcher.sdk.connection.base import Connection
from lurcher.sdk.connection.tcp import tls_context
from lurcher.core.wire import json_shapes as s

_EMPTY = memoryview(b"")
LOGIN_CODES = frozenset({38, 44})
LOGOUT_CODE = 39
PING_CODE = 1
POLL_KIND_NAMES = {int(k): k.name.lower() for k in PollingKind}
PARTITIONING_NAMES = {1: "balanced", 2: "partition_id", 3: "messages_key"}

Call = tuple[str, str, dict[str, Any] | None, Any]  # method, path, query, JSON body


def _id(value: Identifier) -> str:
    return quote(str(value.value), safe="")


def _st(r: Any) -> str:
    return f"/streams/{_id(r.stream_id)}/topics/{_id(r.topic_id)}"


def _topic_body(r: Any) -> dict[str, Any]:
    return {"name": r.name, "compression_algorithm": s.COMPRESSION_NAMES.get(r.compression, "none"),
            "message_expiry": r.message_expiry_us, "max_topic_size": r.max_topic_size_bytes,
            "replication_factor": r.replication_factor or None}


def _optional(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


def _send(r: Any) -> Call:
    batch = r.batch
    blob = memoryview(batch.blob)
    messages = []
    for start in batch.starts().tolist():
        fields = MESSAGE_HEADER.unpack_from(blob, start)
        message_id = fields[1] | fields[2] << 64
        headers_len, payload_len = fields[6], fields[7]
        body = start + MESSAGE_HEADER_BYTES
        payload = blob[body:body + payload_len]
        headers = blob[body + payload_len:body + payload_len + headers_len]
        messages.append({"id": message_id, "payload": s.b64(payload),
                         "user_headers": s.headers_json(headers) if headers_len else None})
    partitioning = {"kind": PARTITIONING_NAMES[r.partitioning.kind],
                    "value": base64.b64encode(r.partitioning.value).decode()}
    return "POST", f"{_st(r)}/messages", None, {"partitioning": partitioning,
                                                 "messages": messages}


def _poll(r: Any) -> Call:
    if r.consumer.is_group:
        raise IggyError(ErrorCode.FEATURE_UNAVAILABLE, "group polling has no HTTP route")
    query = {"consumer_id": r.consumer.id.value, "partition_id": r.partition_id,
             "kind": POLL_KIND_NAMES[r.strategy.kind], "value": r.strategy.value,
             "count": r.count, "auto_commit": "true" if r.auto_commit else "false"}
    return "GET", f"{_st(r)}/messages", _optional(query), None


def _unavailable(r: Any) -> Call:
    raise IggyError(ErrorCode.FEATURE_UNAVAILABLE, f"{type(r).__name__} has no HTTP route")


ROUTES: dict[str, Callable[[Any], Call]] = {
    "ping": lambda r: ("GET", "/ping", None, None),
    "get_stats": lambda r: ("GET", "/stats", None, None),
    "get_cluster_metadata": lambda r: ("GET", "/cluster/metadata", None, None),
    "get_clients": lambda r: ("GET", "/clients", None, None),
    "get_client": lambda r: ("GET", f"/clients/{r.client_id}", None, None),
    "get_me": _unavailable,
    "get_snapshot_file": _unavailable,
    "login_user": lambda r: ("POST", "/users/login", None, _optional(
        {"username": r.username, "password": r.password, "version": r.version,
         "context": r.context})),
    "login_with_personal_access_token": lambda r: (
        "POST", "/personal-access-tokens/login", None, {"token": r.token}),
    "logout_user": lambda r: ("DELETE", "/users/logout", None, None),
    "get_users": lambda r: ("GET", "/users", None, None),
    "get_user": lambda r: ("GET", f"/users/{_id(r.user_id)}", None, None),
    "create_user": lambda r: ("POST", "/users", None, {
        "username": r.username, "password": r.password,
        "status": s.USER_STATUS_NAMES.get(r.status, "active"),
        "permissions": s.permissions_json(r.permissions)}),
    "update_user": lambda r: ("PUT", f"/users/{_id(r.user_id)}", None, _optional({
        "username": r.username,
        "status": None if r.status is None else s.USER_STATUS_NAMES.get(r.status)})),
    "delete_user": lambda r: ("DELETE", f"/users/{_id(r.user_id)}", None, None),
    "update_permissions": lambda r: ("PUT", f"/users/{_id(r.user_id)}/permissions", None,
                                     {"permissions": s.permissions_json(r.permissions)}),
    "change_password": lambda r: ("PUT", f"/users/{_id(r.user_id)}/password", None, {
        "current_password": r.current_password, "new_password": r.new_password}),
    "get_personal_access_tokens": lambda r: ("GET", "/personal-access-tokens", None, None),
    "create_personal_access_token": lambda r: ("POST", "/personal-access-tokens", None,
                                               {"name": r.name, "expiry": r.expiry_us}),
    "delete_personal_access_token": lambda r: (
        "DELETE", f"/personal-access-tokens/{quote(r.name, safe='')}", None, None),
    "get_streams": lambda r: ("GET", "/streams", None, None),
    "get_stream": lambda r: ("GET", f"/streams/{_id(r.stream_id)}", None, None),
    "create_stream": lambda r: ("POST", "/streams", None, {"name": r.name}),
    "update_stream": lambda r: ("PUT", f"/streams/{_id(r.stream_id)}", None, {"name": r.name}),
    "delete_stream": lambda r: ("DELETE", f"/streams/{_id(r.stream_id)}", None, None),
    "purge_stream": lambda r: ("DELETE", f"/streams/{_id(r.stream_id)}/purge", None, None),
    "get_topics": lambda r: ("GET", f"/streams/{_id(r.stream_id)}/topics", None, None),
    "get_topic": lambda r: ("GET", _st(r), None, None),
    "create_topic": lambda r: ("POST", f"/streams/{_id(r.stream_id)}/topics", None,
                               {**_topic_body(r), "partitions_count": r.partitions_count}),
    "update_topic": lambda r: ("PUT", _st(r), None, _topic_body(r)),
    "delete_topic": lambda r: ("DELETE", _st(r), None, None),
    "purge_topic": lambda r: ("DELETE", f"{_st(r)}/purge", None, None),
    "create_partitions": lambda r: ("POST", f"{_st(r)}/partitions", None,
                                    {"partitions_count": r.partitions_count}),
    "delete_partitions": lambda r: ("DELETE", f"{_st(r)}/partitions",
                                    {"partitions_count": r.partitions_count}, None),
    "delete_segments": lambda r: ("DELETE", f"{_st(r)}/partitions/{r.partition_id}",
                                  {"segments_count": r.segments_count}, None),
    "get_consumer_groups": lambda r: ("GET", f"{_st(r)}/consumer-groups", None, None),
    "get_consumer_group": lambda r: ("GET", f"{_st(r)}/consumer-groups/{_id(r.group_id)}",
                                     None, None),
    "create_consumer_group": lambda r: ("POST", f"{_st(r)}/consumer-groups", None,
                                        {"name": r.name}),
    "delete_consumer_group": lambda r: ("DELETE", f"{_st(r)}/consumer-groups/{_id(r.group_id)}",
                                        None, None),
    "join_consumer_group": _unavailable,
    "leave_consumer_group": _unavailable,
    "get_consumer_offset": lambda r: ("GET", f"{_st(r)}/consumer-offsets", _optional(
        {"consumer_id": r.consumer.id.value, "partition_id": r.partition_id}), None),
    "store_consumer_offset": lambda r: ("PUT", f"{_st(r)}/consumer-offsets", None, {
        "consumer_id": r.consumer.id.value, "partition_id": r.partition_id,
        "offset": r.offset}),
    "delete_consumer_offset": lambda r: (
        "DELETE", f"{_st(r)}/consumer-offsets/{quote(str(r.consumer.id.value), safe='')}",
        _optional({"partition_id": r.partition_id}), None),
    "send_messages": _send,
    "poll_messages": _poll,
    "flush_unsaved_buffer": lambda r: (
        "GET", f"{_st(r)}/messages/flush/{r.partition_id}/{'true' if r.fsync else 'false'}",
        None, None),
}


def error_status(response: httpx.Response) -> int:
    """The Iggy status of an error answer."""
    try:
        data = response.json()
        return int(data["id"])
    except (ValueError, KeyError, TypeError):
        if response.status_code == 401:
            return ErrorCode.UNAUTHENTICATED
        if response.status_code == 403:
            return ErrorCode.UNAUTHORIZED
        return ErrorCode.HTTP_RESPONSE_ERROR


class HttpConnection(Connection):
    """The REST API behind the binary connection interface."""

    def __init__(self, config: ClientConfig) -> None:
        super().__init__()
        self.config = config
        self.host, self.port = config.host_port()
        self.token: str | None = None
        self._http: httpx.AsyncClient | None = None

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.config.tls else 'http'}://{host}:{self.port}"

    @property
    def connected(self) -> bool:
        return self._http is not None and not self._http.is_closed

    async def _connect(self) -> None:
        if self.connected:
            return
        verify: ssl.SSLContext | bool = tls_context(self.config) if self.config.tls else False
        self._http = httpx.AsyncClient(base_url=self.base_url, verify=verify,
                                       timeout=self.config.request_timeout_s)
        try:
            response = await self._http.get("/ping", timeout=self.config.connect_timeout_s)
        except httpx.TimeoutException:
            await self._abort()
            raise IggyError(ErrorCode.TASK_TIMEOUT, f"{self.base_url}: no answer") from None
        except (httpx.HTTPError, OSError, ssl.SSLError) as e:
            await self._abort()
            raise IggyError(ErrorCode.CANNOT_ESTABLISH_CONNECTION, f"{self.base_url}: {e}") from None
        if response.status_code != 200:
            await self._abort()
            raise IggyError(ErrorCode.CANNOT_ESTABLISH_CONNECTION,
                            f"{self.base_url}/ping answered {response.status_code}")

    async def _exchange(self, code: int, parts: list[Buffer]) -> tuple[int, memoryview]:
        try:
            request = REQUEST_TYPES[code].decode_exact(b"".join(bytes(p) for p in parts))
        except KeyError:
            return ErrorCode.INVALID_COMMAND, _EMPTY
        except WireError as e:
            return e.status, _EMPTY
        spec = COMMANDS[code]
        try:
            method, path, query, body = ROUTES[spec.name](request)
        except IggyError as e:
            return e.status, _EMPTY
        try:
            response = await self._send(method, path, query, body)
        except httpx.TimeoutException:
            raise IggyError(ErrorCode.TASK_TIMEOUT, f"{method} {path}: no answer") from None
        except (httpx.HTTPError, OSError) as e:
            raise IggyError(ErrorCode.CONNECTION_CLOSED, f"{method} {path}: {e!r}") from None
        return self._answer(code, response)

    async def _send(self, method: str, path: str, query: Any, body: Any) -> httpx.Response:
        assert self._http is not None
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return await self._http.request(method, path, params=query, json=body, headers=headers)

    def _answer(self, code: int, response: httpx.Response) -> tuple[int, memoryview]:
        spec = COMMANDS[code]
        if response.status_code >= 300:
            status = error_status(response)
            if status == 404 and spec.response_optional:
                return 0, _EMPTY
            return (ErrorCode.RESOURCE_NOT_FOUND if status == 404 else status), _EMPTY
        if code == LOGOUT_CODE:
            self.token = None
        if spec.response is None:
            return 0, _EMPTY
        try:
            data = response.json()
        except ValueError:
            return ErrorCode.INVALID_JSON_RESPONSE, _EMPTY
        if code in LOGIN_CODES:
            self.token = (data.get("access_token") or {}).get("token")
        value = s.from_json(spec.response, data, spec.response_is_list)
        payload = (WireStruct.encode_list(value) if spec.response_is_list else value.encode())
        return 0, memoryview(payload)

    async def _abort(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()
