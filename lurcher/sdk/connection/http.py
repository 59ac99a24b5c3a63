"""``HttpConnection``: the binary ``Connection`` interface carried over the REST API (§14).

The SDK speaks binary requests; this class decodes each one into its typed request
(``core.wire``), sends the matching REST call (the spec's REST route, filled by
``rest_call``), and turns the JSON answer back into the binary OK payload of that command, so
``Client`` works unchanged over HTTP. Login
requests keep the returned JWT and send it as ``Authorization: Bearer`` afterwards;
LogoutUser revokes it. Error answers become their Iggy status; a bare 401 becomes
UNAUTHENTICATED; a 404 "not found" for an optional resource becomes an empty OK (None).
Commands with no HTTP route (GetMe, joining/leaving groups, group polling, the snapshot
file) raise NotOverTransport (FEATURE_UNAVAILABLE naming the command) without a request.
TLS (``https://``) when ``config.tls``.
An answer's body (decoded) is read up to the ``response_buffer_size`` option
(``response_limit``, as on the binary transports): a body announcing or bringing more fails
its request with INVALID_BYTES_RESPONSE without being read further, and the connection is
closed. The SDK asks for gzip or deflate and decodes them itself (``BoundedDecoder``), never
more than the bound plus one byte: a small compressed answer cannot decode into a large one
first (httpx decodes each network read whole); another content coding, or a body that does
not decode, is INVALID_BYTES_RESPONSE too. ``request_timeout_s`` bounds each exchange as a
whole (a peer trickling its answer is not waited for past it), ``connect_timeout_s`` the
connect's ``/ping``.
"""

from __future__ import annotations

import asyncio
import base64
import re
import ssl
import struct
import zlib
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx

from lurcher.core.wire.buffer import U32_MAX, Buffer
from lurcher.core.wire.codec import REQUEST_TYPES, WireStruct
from lurcher.core.wire.commands import COMMANDS, CommandSpec, RestRoute
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError, WireError
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.responses.messages import MESSAGE_HEADER, MESSAGE_HEADER_BYTES
from lurcher.core.wire.values.polling import PollingKind
from lurcher.sdk.config import ClientConfig
from lurcher.sdk.connection.base import (Connection, NotOverTransport, oversized,
                                          response_limit)
from lurcher.sdk.connection.tcp import tls_context
from lurcher.core.wire import json_shapes as s

_EMPTY = memoryview(b"")
LOGIN_CODES = frozenset({38, 44})
LOGOUT_CODE = 39
PING_CODE = 1
POLL_KIND_NAMES = {int(k): k.name.lower() for k in PollingKind}
PARTITIONING_NAMES = {1: "balanced", 2: "partition_id", 3: "messages_key"}

Call = tuple[str, str, dict[str, Any] | None, Any]  # method, path, query, JSON body
Params = tuple[dict[str, Any] | None, Any]  # query, JSON body


def _id(value: Identifier) -> str:
    return quote(str(value.value), safe="")


def _topic_body(r: Any) -> dict[str, Any]:
    return {"name": r.name, "compression_algorithm": s.COMPRESSION_NAMES.get(r.compression, "none"),
            "message_expiry": r.message_expiry_us, "max_topic_size": r.max_topic_size_bytes,
            "replication_factor": r.replication_factor or None}


def _optional(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


def _send(r: Any) -> Params:
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
    return None, {"partitioning": partitioning, "messages": messages}


def _poll(r: Any) -> Params:
    if r.consumer.is_group:
        raise NotOverTransport("poll_messages", "http",
                               "a consumer group poll has no HTTP route")
    query = {"consumer_id": r.consumer.id.value, "partition_id": r.partition_id,
             "kind": POLL_KIND_NAMES[r.strategy.kind], "value": r.strategy.value,
             "count": r.count, "auto_commit": "true" if r.auto_commit else "false"}
    return _optional(query), None


# How each ``{field}`` of a REST path template is filled from the request.
PATH_FIELDS: dict[str, Callable[[Any], str]] = {
    "stream_id": lambda r: _id(r.stream_id),
    "topic_id": lambda r: _id(r.topic_id),
    "user_id": lambda r: _id(r.user_id),
    "group_id": lambda r: _id(r.group_id),
    "client_id": lambda r: str(r.client_id),
    "partition_id": lambda r: str(r.partition_id),
    "name": lambda r: quote(r.name, safe=""),
    "consumer_id": lambda r: quote(str(r.consumer.id.value), safe=""),
    "fsync": lambda r: "true" if r.fsync else "false",
}
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def rest_path(template: str, request: Any) -> str:
    """``template`` with every ``{field}`` filled from ``request`` (``PATH_FIELDS``)."""
    return _PLACEHOLDER.sub(lambda m: PATH_FIELDS[m.group(1)](request), template)


# Query parameters and JSON body of the commands that have either; the method and path are
# the command's REST route in the registry (``core.wire.commands``).
PARAMS: dict[str, Callable[[Any], Params]] = {
    "login_user": lambda r: (None, _optional(
        {"username": r.username, "password": r.password, "version": r.version,
         "context": r.context})),
    "login_with_personal_access_token": lambda r: (None, {"token": r.token}),
    "create_user": lambda r: (None, {
        "username": r.username, "password": r.password,
        "status": s.USER_STATUS_NAMES.get(r.status, "active"),
        "permissions": s.permissions_json(r.permissions)}),
    "update_user": lambda r: (None, _optional({
        "username": r.username,
        "status": None if r.status is None else s.USER_STATUS_NAMES.get(r.status)})),
    "update_permissions": lambda r: (None,
                                     {"permissions": s.permissions_json(r.permissions)}),
    "change_password": lambda r: (None, {
        "current_password": r.current_password, "new_password": r.new_password}),
    "create_personal_access_token": lambda r: (None, {"name": r.name, "expiry": r.expiry_us}),
    "create_stream": lambda r: (None, {"name": r.name}),
    "update_stream": lambda r: (None, {"name": r.name}),
    "create_topic": lambda r: (None, {**_topic_body(r), "partitions_count": r.partitions_count}),
    "update_topic": lambda r: (None, _topic_body(r)),
    "create_partitions": lambda r: (None, {"partitions_count": r.partitions_count}),
    "delete_partitions": lambda r: ({"partitions_count": r.partitions_count}, None),
    "delete_segments": lambda r: ({"segments_count": r.segments_count}, None),
    "create_consumer_group": lambda r: (None, {"name": r.name}),
    "get_consumer_offset": lambda r: (_optional(
        {"consumer_id": r.consumer.id.value, "partition_id": r.partition_id}), None),
    "store_consumer_offset": lambda r: (None, {
        "consumer_id": r.consumer.id.value, "partition_id": r.partition_id,
        "offset": r.offset}),
    "delete_consumer_offset": lambda r: (_optional({"partition_id": r.partition_id}), None),
    "send_messages": _send,
    "poll_messages": _poll,
}
# Routed on the server but not through this class: why.
NOT_OVER_HTTP = {"get_snapshot_file": "its answer is a ZIP file, not JSON"}
_NO_PARAMS: Params = (None, None)


def rest_call(spec: CommandSpec, request: Any) -> Call:
    """The REST call for ``request``. Raises NotOverTransport for a command with no HTTP
    route."""
    if spec.rest is None or spec.name in NOT_OVER_HTTP:
        raise NotOverTransport(spec.name, "http", NOT_OVER_HTTP.get(spec.name, "no HTTP route"))
    params = PARAMS.get(spec.name)
    query, body = _NO_PARAMS if params is None else params(request)
    return spec.rest.method, rest_path(spec.rest.path, request), query, body


def error_status(response: httpx.Response) -> int:
    """The Iggy status of an error answer: its JSON ``id`` when that is a status (an integer
    from 1 to 2**32-1, as over the binary transports), else one for its HTTP status."""
    try:
        status = response.json()["id"]
    except (ValueError, KeyError, TypeError, IndexError):
        status = None
    if type(status) is int and 0 < status <= U32_MAX:
        return status
    if response.status_code == 401:
        return ErrorCode.UNAUTHENTICATED
    if response.status_code == 403:
        return ErrorCode.UNAUTHORIZED
    return ErrorCode.HTTP_RESPONSE_ERROR


def access_token(identity: Any) -> str | None:
    """The JWT of a login answer (``access_token.token``), or None when it has none."""
    access = identity.get("access_token") if isinstance(identity, dict) else None
    token = access.get("token") if isinstance(access, dict) else None
    return token if isinstance(token, str) else None


# The content codings asked for (``Accept-Encoding``) and the zlib window of each.
ACCEPT_ENCODING = "gzip, deflate"
CODING_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS,
                "deflate": zlib.MAX_WBITS}


def undecodable(why: str) -> IggyError:
    return IggyError(ErrorCode.INVALID_BYTES_RESPONSE, f"answer body: {why}")


class BoundedDecoder:
    """One body's content coding undone, at most ``limit`` decoded bytes in all: each
    ``decode`` asks zlib for no more than the room left plus one byte, so a compressed bomb
    is refused having produced ``limit + 1`` bytes. Raises IggyError
    INVALID_BYTES_RESPONSE (over the limit, an unknown coding, data that does not decode).
    """

    def __init__(self, content_encoding: str, limit: int) -> None:
        codings = [c.strip().lower() for c in content_encoding.split(",")]
        codings = [c for c in codings if c not in ("", "identity")]
        if len(codings) > 1 or (codings and codings[0] not in CODING_WBITS):
            raise undecodable(f"content-encoding {content_encoding!r} was not asked for")
        self.coding = codings[0] if codings else None
        self.limit = limit
        self.size = 0
        self._zlib = zlib.decompressobj(CODING_WBITS[self.coding]) if self.coding else None

    def decode(self, raw: bytes) -> bytes:
        if self._zlib is None:
            return self._counted(raw)
        pieces: list[bytes] = []
        while raw:
            try:
                piece = self._zlib.decompress(raw, self.limit - self.size + 1)
            except zlib.error as e:
                if not self._raw_deflate_instead():
                    raise undecodable(f"{self.coding} data does not decode ({e})") from None
                continue
            pieces.append(self._counted(piece))
            raw = self._zlib.unconsumed_tail
        return b"".join(pieces)

    def _raw_deflate_instead(self) -> bool:
        """"deflate" sent without its zlib wrapper (as some servers do): start again raw."""
        if self.coding != "deflate" or self.size:
            return False
        self.coding = "raw deflate"
        self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
        return True

    def _counted(self, data: bytes) -> bytes:
        self.size += len(data)
        if self.size > self.limit:
            raise oversized(self.size, self.limit)
        return data


async def bounded_body(response: httpx.Response, limit: int) -> bytes:
    """The whole (decoded) body of a streamed ``response``. Raises IggyError
    INVALID_BYTES_RESPONSE as soon as its Content-Length, or what it decodes to, is over
    ``limit`` (``BoundedDecoder``)."""
    announced = response.headers.get("content-length", "")
    if announced.isdigit() and int(announced) > limit:
        raise oversized(int(announced), limit)
    decoder = BoundedDecoder(response.headers.get("content-encoding", ""), limit)
    chunks = [decoder.decode(raw) async for raw in response.aiter_raw()]
    return b"".join(chunks)


def binary_payload(spec: CommandSpec, data: Any) -> bytes:
    """The binary OK payload of ``spec``'s response for the JSON answer ``data``. Raises
    IggyError INVALID_JSON_RESPONSE (as Iggy's HTTP client) for data of another shape, or
    with a number out of its field's range."""
    try:
        value = s.from_json(spec.response, data, spec.response_is_list)
        return WireStruct.encode_list(value) if spec.response_is_list else value.encode()
    except IggyError as e:
        raise IggyError(ErrorCode.INVALID_JSON_RESPONSE, e.detail) from None
    except (struct.error, OverflowError, TypeError, ValueError) as e:
        raise IggyError(ErrorCode.INVALID_JSON_RESPONSE,
                        f"unexpected JSON for {spec.response.__name__}: {e}") from None


class HttpConnection(Connection):
    """The REST API behind the binary connection interface."""

    def __init__(self, config: ClientConfig) -> None:
        super().__init__()
        self.config = config
        self.host, self.port = config.host_port()
        self.limit = response_limit(config.options)
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
                                       timeout=self.config.request_timeout_s,
                                       headers={"Accept-Encoding": ACCEPT_ENCODING})
        seconds = self.config.connect_timeout_s
        try:
            response = await asyncio.wait_for(
                self._send("GET", "/ping", None, None, timeout=seconds), seconds)
        except IggyError:
            await self._abort()
            raise
        except (TimeoutError, httpx.TimeoutException):
            await self._abort()
            raise IggyError(ErrorCode.TASK_TIMEOUT, f"{self.base_url}: no answer") from None
        except (httpx.HTTPError, OSError, ssl.SSLError) as e:
            await self._abort()
            raise IggyError(ErrorCode.CANNOT_ESTABLISH_CONNECTION,
                            f"{self.base_url}: {e}") from None
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
        method, path, query, body = rest_call(COMMANDS[code], request)
        return self._answer(code, await self._request(method, path, query, body))

    async def _request(self, method: str, path: str, query: Any = None,
                       body: Any = None) -> httpx.Response:
        """``_send`` within ``request_timeout_s`` for the whole exchange (httpx's timeout
        bounds each read alone). Raises IggyError TASK_TIMEOUT, CONNECTION_CLOSED or
        INVALID_BYTES_RESPONSE."""
        what, seconds = f"{method} {path}", self.config.request_timeout_s
        try:
            return await asyncio.wait_for(self._send(method, path, query, body), seconds)
        except (TimeoutError, httpx.TimeoutException):
            raise IggyError(ErrorCode.TASK_TIMEOUT, f"{what}: no answer within {seconds}s"
                            ) from None
        except (httpx.HTTPError, OSError) as e:
            raise IggyError(ErrorCode.CONNECTION_CLOSED, f"{what}: {e!r}") from None

    async def _send(self, method: str, path: str, query: Any, body: Any,
                    timeout: Any = httpx.USE_CLIENT_DEFAULT) -> httpx.Response:
        """The answer, its body read whole (``bounded_body``). Raises httpx errors, or
        IggyError INVALID_BYTES_RESPONSE for a body over ``self.limit``."""
        assert self._http is not None
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        request = self._http.build_request(method, path, params=query, json=body,
                                           headers=headers, timeout=timeout)
        response = await self._http.send(request, stream=True)
        try:
            content = await bounded_body(response, self.limit)
        finally:
            await response.aclose()
        return httpx.Response(response.status_code, content=content, request=request)

    async def get_json(self, route: RestRoute) -> Any:
        """The JSON answer of a lurcher-only route (no binary command; no path fields),
        sent with this connection's token. Raises IggyError."""
        what = f"{route.method} {route.path}"
        response = await self._request(route.method, route.path)
        if response.status_code >= 300:
            raise IggyError(error_status(response), what)
        try:
            return response.json()
        except ValueError:
            raise IggyError(ErrorCode.INVALID_JSON_RESPONSE, what) from None

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
        payload = binary_payload(spec, data)
        if code in LOGIN_CODES:
            self.token = access_token(data)
        return 0, memoryview(payload)

    async def _abort(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()
