"""The HTTP REST API (wire §14) as a Starlette application over the shard's dispatcher.

Every route builds a typed request from ``core.wire.requests`` and runs it with
``Dispatcher.execute``; the reply payload is decoded with the command table and written as
the §14.2 JSON shape. No command logic lives here. Routes match the raw path
(``paths.EscapedSlashes``), so a name holding '/' is one segment as ``%2F``, as in Iggy.
Authentication: ``Authorization: Bearer <JWT>`` on every route except ``/``, ``/ping``, the
metrics endpoint, the login and refresh routes; a request's session is transient (opened for
the request, closed after it) and carries the token's user, whose login must still hold as a
binary session's must (``auth.permissions.stale_login``: the user exists, is active and is
the user the token was issued to, a later user given a deleted user's id inheriting none of
its tokens, and the personal access token of a token login still exists). Missing or bad
tokens get a bare 401. Errors are ``{"id","code","reason","field"}`` with the §14 status
mapping; malformed JSON is 400 INVALID_FORMAT, a body that does not fit its type (a
missing required field, a wrong type, a null: ``bodies``) 422 INVALID_FORMAT, both as Iggy
0.8's axum ``Json``, invalid UTF-8 is 400 INVALID_UTF8, a body that is not
``application/json`` is 415, a body above ``max_request_size`` is 413, and so is a body of a
route taken before any login (login, token login, refresh) above
``limits.max_unauthenticated_payload_bytes``, as a binary frame before login is held to it
(``unauthenticated_body``: no more is buffered, so a client trickling such bodies holds no more
than that per connection). A built request must have a binary form
(``validation.check_encodable``: integers in their wire ranges) and passes the same
``validate()`` as a binary one, in the dispatcher. One lurcher-only route: ``GET
/cluster/status`` (``cluster.status``), authenticated.

A poll answer above ``RENDER_OFF_LOOP_BYTES`` is turned into JSON on the API's one renderer
thread, not on the event loop: its JSON costs Python work per message and per header (a
16 MiB poll of header-laden messages takes seconds), and other requests of the shard go on
meanwhile (the GIL is handed over every few milliseconds); big answers queue for it one at a
time.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Match, Route

from lurcher.auth.permissions import stale_login
from lurcher.auth.session import TRANSPORT_HTTP
from lurcher.core.connection.failures import failure_status
from lurcher.core.shard.reply import payload_bytes
from lurcher.core.wire.batch import MessageBatch
from lurcher.cluster.status import cluster_status
from lurcher.core.wire.commands import CLUSTER_STATUS_ROUTE, COMMANDS, by_name, decode_response
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.consumer_groups.create_consumer_group import CreateConsumerGroup
from lurcher.core.wire.requests.consumer_groups.delete_consumer_group import DeleteConsumerGroup
from lurcher.core.wire.requests.consumer_groups.get_consumer_group import GetConsumerGroup
from lurcher.core.wire.requests.consumer_groups.get_consumer_groups import GetConsumerGroups
from lurcher.core.wire.requests.consumer_offsets.delete_consumer_offset import (
    DeleteConsumerOffset,
)
from lurcher.core.wire.requests.consumer_offsets.get_consumer_offset import GetConsumerOffset
from lurcher.core.wire.requests.consumer_offsets.store_consumer_offset import StoreConsumerOffset
from lurcher.core.wire.requests.messages.flush_unsaved_buffer import FlushUnsavedBuffer
from lurcher.core.wire.requests.messages.poll_messages import PollMessages
from lurcher.core.wire.requests.messages.send_messages import SendMessages
from lurcher.core.wire.requests.partitions.create_partitions import CreatePartitions
from lurcher.core.wire.requests.partitions.delete_partitions import DeletePartitions
from lurcher.core.wire.requests.pat.create_personal_access_token import (
    CreatePersonalAccessToken,
)
from lurcher.core.wire.requests.pat.delete_personal_access_token import (
    DeletePersonalAccessToken,
)
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
from lurcher.core.wire.requests.system.get_snapshot_file import GetSnapshotFile
from lurcher.core.wire.responses.messages import PolledMessages
from lurcher.core.wire.responses.snapshot import SnapshotFile
from lurcher.core.wire.requests.system.get_stats import GetStats
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
from lurcher.core.wire.requests.users.update_permissions import UpdatePermissions
from lurcher.core.wire.requests.users.update_user import UpdateUser
from lurcher.core.wire.responses.identity import IdentityInfo
from lurcher.core.wire.validation import check_encodable
from lurcher.core.wire.values.consumer import Consumer
from lurcher.core.wire.values.partitioning import Partitioning
from lurcher.core.wire.values.polling import PollingKind, PollingStrategy
from lurcher.transports.frontend import FrontEndRefused
from lurcher.transports.http import bodies as b
from lurcher.transports.http.paths import EscapedSlashes, path_parameter
from lurcher.core.wire import json_shapes as s
from lurcher.core.wire import units
from lurcher.core.wire.units import U64_MAX
from lurcher.transports.http.bearer import bearer_credentials
from lurcher.transports.http.jwt import JwtManager, Token

if TYPE_CHECKING:
    from lurcher.runtime.settings import Cors

log = logging.getLogger(__name__)

JSON_TYPE = "application/json"
RENDER_OFF_LOOP_BYTES = 64 * 1024  # poll answers above this are rendered off the loop
POLL_KINDS = {k.name.lower(): int(k) for k in PollingKind}
PARTITIONING_KINDS = {"balanced": 1, "partition_id": 2, "messages_key": 3}
DEFAULT_POLL_COUNT = 10
CONSUMER_KINDS = {"consumer": "consumer", "consumer_group": "consumer_group"}


def refuse_invalid_utf8(raw: bytes) -> None:
    """Raise IggyError INVALID_UTF8 when ``raw`` is not UTF-8. Called once a body failed to
    decode: older msgspec releases raise UnicodeDecodeError for invalid UTF-8, 0.23 a plain
    DecodeError ("Invalid UTF-8 encoded string"), so the bytes themselves are checked."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise IggyError(ErrorCode.INVALID_UTF8, f"JSON body: {exc.reason}") from None


class JsonResponse(Response):
    media_type = JSON_TYPE

    def render(self, content: Any) -> bytes:
        return msgspec.json.encode(content)


def error_response(code: int, detail: str | None = None) -> Response:
    return JsonResponse(s.error_json(code, detail), status_code=s.http_status(code))


@dataclass
class Call:
    """What a route builder sees: path parameters, query parameters, decoded body."""

    path: dict[str, str]
    query: Any
    body: Any

    def ident(self, name: str) -> Identifier:
        return Identifier.parse(self.path[name])

    def st(self) -> tuple[Identifier, Identifier]:
        return self.ident("stream_id"), self.ident("topic_id")

    def int_param(self, name: str, default: int | None = None, *, path: bool = False) -> Any:
        """An integer path/query parameter: ASCII digits only (``units.decimal``; ``int``
        also read '١', '１', ' 1', '1_0' and '-1'). Raises IggyError INVALID_FORMAT."""
        raw = self.path.get(name) if path else self.query.get(name)
        if raw is None or raw == "":
            if default is None and path:
                raise IggyError(ErrorCode.INVALID_FORMAT, f"missing {name}")
            return default
        number = units.decimal(raw, U64_MAX)  # then check_encodable: the field's own range
        if number is None:
            raise IggyError(ErrorCode.INVALID_FORMAT,
                            f"{name}: not an integer: {units.shown(raw)}")
        return number


# -- request builders (route -> typed request) --------------------------------------------------
def _status_code(name: str | None) -> int | None:
    return None if name is None else s.lookup(s.USER_STATUS_CODES, name, "user status")


def _topic_fields(body: b.TopicBody) -> tuple[int, int, int, int]:
    """(compression code, expiry, size, replication factor) of a decoded topic body.
    A ``replication_factor`` of 0 is INVALID_REPLICATION_FACTOR, as Iggy 0.8's HTTP API
    (only a left-out or null one takes the server's: 0 on the wire). Raises IggyError."""
    if body.replication_factor == 0:
        raise IggyError(ErrorCode.INVALID_REPLICATION_FACTOR,
                        "replication_factor: 0 (leave it out for the server's)")
    return (s.lookup(s.COMPRESSION_CODES, body.compression_algorithm, "compression_algorithm"),
            body.message_expiry, body.max_topic_size, body.replication_factor or 0)


def _consumer(raw: Any) -> Consumer:
    return Consumer.of(raw if raw is not None else 1)


def _offset_owner(c: Call) -> Consumer:
    """The consumer of a consumer-offset query. Iggy's REST API names only plain consumers;
    lurcher also accepts ``consumer_kind=consumer_group`` (the web console reads a group's
    stored offsets with it to show lag). Raises IggyError INVALID_FORMAT."""
    kind = s.lookup(CONSUMER_KINDS, c.query.get("consumer_kind", "consumer"), "consumer_kind")
    raw = c.query.get("consumer_id")
    return Consumer.of(raw if raw is not None else 1, group=kind == "consumer_group")


def build_create_topic(c: Call) -> CreateTopic:
    comp, expiry, size, rf = _topic_fields(c.body)
    return CreateTopic(c.ident("stream_id"), c.body.partitions_count, comp, expiry, size, rf,
                       c.body.name)


def build_update_topic(c: Call) -> UpdateTopic:
    comp, expiry, size, rf = _topic_fields(c.body)
    return UpdateTopic(*c.st(), comp, expiry, size, rf, c.body.name)


def build_poll(c: Call) -> PollMessages:
    kind = s.lookup(POLL_KINDS, c.query.get("kind", "offset"), "polling kind")
    auto_commit = str(c.query.get("auto_commit", "false")).lower() == "true"
    return PollMessages(_consumer(c.query.get("consumer_id")), *c.st(),
                        c.int_param("partition_id", 0),
                        PollingStrategy(kind, c.int_param("value", 0)),
                        c.int_param("count", DEFAULT_POLL_COUNT), auto_commit)


def build_send(c: Call) -> SendMessages:
    body: b.SendBody = c.body
    kind = s.lookup(PARTITIONING_KINDS, body.partitioning.kind, "partitioning kind")
    partitioning = Partitioning(kind, s.unb64(body.partitioning.value or "", "partitioning"))
    if kind == 2 and len(partitioning.value) != 4:
        raise IggyError(ErrorCode.INVALID_FORMAT, "partition_id value must be 4 bytes")
    if kind == 3:
        partitioning = Partitioning.messages_key(partitioning.value)
    if not body.messages:
        raise IggyError(ErrorCode.INVALID_MESSAGES_COUNT, "no messages")
    payloads = [s.unb64(m.payload, "payload") for m in body.messages]
    ids = [s.message_id(m.id) for m in body.messages]
    headers = [s.headers_from_json(m.user_headers) for m in body.messages]
    batch = MessageBatch.build(payloads, ids, headers).writable()
    return SendMessages(*c.st(), partitioning, batch)


def build_store_offset(c: Call) -> StoreConsumerOffset:
    body: b.StoreOffsetBody = c.body
    return StoreConsumerOffset(_consumer(body.consumer_id), *c.st(), body.partition_id,
                               body.offset)


Builder = Callable[[Call], Any]

# command name -> (request builder, body type, success status); the method and path are the
# command's REST route in the registry (``core.wire.commands``).
BUILDERS: dict[str, tuple[Builder, type | None, int]] = {
    "get_stats": (lambda c: GetStats(), None, 200),
    "get_cluster_metadata": (lambda c: GetClusterMetadata(), None, 200),
    "get_clients": (lambda c: GetClients(), None, 200),
    "get_client": (lambda c: GetClient(c.int_param("client_id", path=True)), None, 200),
    "get_snapshot_file": (lambda c: GetSnapshotFile(
        b.SNAPSHOT_COMPRESSIONS[c.body.compression],
        [b.SNAPSHOT_TYPE_CODES[kind] for kind in c.body.snapshot_types]), b.SnapshotBody, 200),
    "get_users": (lambda c: GetUsers(), None, 200),
    "create_user": (lambda c: CreateUser(
        c.body.username, c.body.password, _status_code(c.body.status),
        s.permissions_from_json(c.body.permissions)), b.CreateUserBody, 200),
    "get_user": (lambda c: GetUser(c.ident("user_id")), None, 200),
    "update_user": (lambda c: UpdateUser(
        c.ident("user_id"), c.body.username, _status_code(c.body.status)), b.UpdateUserBody, 204),
    "delete_user": (lambda c: DeleteUser(c.ident("user_id")), None, 204),
    "update_permissions": (lambda c: UpdatePermissions(
        c.ident("user_id"), s.permissions_from_json(c.body.permissions)), b.PermissionsBody, 204),
    "change_password": (lambda c: ChangePassword(
        c.ident("user_id"), c.body.current_password, c.body.new_password), b.PasswordBody, 204),
    "get_personal_access_tokens": (lambda c: GetPersonalAccessTokens(), None, 200),
    "create_personal_access_token": (lambda c: CreatePersonalAccessToken(
        c.body.name, c.body.expiry), b.CreatePatBody, 200),
    "delete_personal_access_token": (
        lambda c: DeletePersonalAccessToken(c.path["name"]), None, 204),
    "get_streams": (lambda c: GetStreams(), None, 200),
    "create_stream": (lambda c: CreateStream(c.body.name), b.NameBody, 200),
    "get_stream": (lambda c: GetStream(c.ident("stream_id")), None, 200),
    "update_stream": (
        lambda c: UpdateStream(c.ident("stream_id"), c.body.name), b.NameBody, 204),
    "delete_stream": (lambda c: DeleteStream(c.ident("stream_id")), None, 204),
    "purge_stream": (lambda c: PurgeStream(c.ident("stream_id")), None, 204),
    "get_topics": (lambda c: GetTopics(c.ident("stream_id")), None, 200),
    "create_topic": (build_create_topic, b.CreateTopicBody, 200),
    "get_topic": (lambda c: GetTopic(*c.st()), None, 200),
    "update_topic": (build_update_topic, b.TopicBody, 204),
    "delete_topic": (lambda c: DeleteTopic(*c.st()), None, 204),
    "purge_topic": (lambda c: PurgeTopic(*c.st()), None, 204),
    "create_partitions": (lambda c: CreatePartitions(
        *c.st(), c.body.partitions_count), b.PartitionsBody, 201),
    "delete_partitions": (lambda c: DeletePartitions(
        *c.st(), c.int_param("partitions_count", 0)), None, 204),
    "delete_segments": (lambda c: DeleteSegments(
        *c.st(), c.int_param("partition_id", path=True), c.int_param("segments_count", 0)),
        None, 204),
    "get_consumer_groups": (lambda c: GetConsumerGroups(*c.st()), None, 200),
    "create_consumer_group": (
        lambda c: CreateConsumerGroup(*c.st(), c.body.name), b.NameBody, 201),
    "get_consumer_group": (
        lambda c: GetConsumerGroup(*c.st(), c.ident("group_id")), None, 200),
    "delete_consumer_group": (
        lambda c: DeleteConsumerGroup(*c.st(), c.ident("group_id")), None, 204),
    "get_consumer_offset": (lambda c: GetConsumerOffset(
        _offset_owner(c), *c.st(), c.int_param("partition_id")), None, 200),
    "store_consumer_offset": (build_store_offset, b.StoreOffsetBody, 204),
    "delete_consumer_offset": (lambda c: DeleteConsumerOffset(
        Consumer.of(c.path["consumer_id"]), *c.st(), c.int_param("partition_id")), None, 204),
    "poll_messages": (build_poll, None, 200),
    "send_messages": (build_send, b.SendBody, 201),
    "flush_unsaved_buffer": (lambda c: FlushUnsavedBuffer(
        *c.st(), c.int_param("partition_id", path=True), c.path["fsync"].lower() == "true"),
        None, 200),
}
# Commands whose REST route ``HttpApi`` serves itself (no typed request from a body).
SPECIAL_ROUTES = frozenset({"ping", "login_user", "logout_user",
                            "login_with_personal_access_token"})


def command_routes() -> list[tuple[str, str, Builder, type | None, int]]:
    """(method, path, builder, body type, success status) per command with a REST route.

    Raises RuntimeError naming a command whose route has no builder, or a builder with no
    routed command (checked at import, so such a server never starts).
    """
    routed = {spec.name: spec.rest for spec in COMMANDS.values()
              if spec.rest is not None and spec.name not in SPECIAL_ROUTES}
    for name in sorted(set(routed) ^ set(BUILDERS)):
        raise RuntimeError(f"HTTP route table: command {name} has a REST route or a "
                           "builder but not both")
    return [(rest.method, rest.path, *BUILDERS[name]) for name, rest in routed.items()]


COMMAND_ROUTES = command_routes()


class AuthFailed(Exception):
    """No usable bearer token: answered with a bare 401."""


class HttpApi:
    """The routes over one shard."""

    def __init__(self, shard: Any, jwt: JwtManager, metrics: Any = None,
                 metrics_path: str = "/metrics") -> None:
        self.shard = shard
        self.jwt = jwt
        self.metrics = metrics
        self.metrics_path = metrics_path
        # big poll answers to JSON, one at a time (the thread starts on first use)
        self.renderer = ThreadPoolExecutor(1, thread_name_prefix="http-json")

    def close(self) -> None:
        """Stop the renderer thread (after the answer it is rendering; queued ones are
        dropped: their connections are gone with the server)."""
        self.renderer.shutdown(wait=False, cancel_futures=True)

    # -- plumbing ---------------------------------------------------------------------------
    def bearer(self, request: Request) -> Token:
        """The verified token of ``request``. Raises AuthFailed."""
        token = bearer_credentials(request.scope["headers"]).decode("latin-1")
        if not token:
            raise AuthFailed("missing bearer token")
        try:
            verified = self.jwt.verify(token)
        except IggyError as exc:
            raise AuthFailed(str(exc)) from None
        self.require_token_user(verified)
        return verified

    def require_token_user(self, token: Token) -> None:
        """Raises AuthFailed unless the token's login still holds (``stale_login``: its user
        exists, is active and was created when the token says, ids of deleted users being
        given out again, and the personal access token it logged in with still exists)."""
        if token.user_created_at is None:
            raise AuthFailed("token without the user_created_at claim (issued before it)")
        stale = stale_login(self.shard.meta.state, token)
        if stale is not None:
            raise AuthFailed(stale)

    def open(self, request: Request, token: Token | None) -> Any:
        """A transient session, logged in with ``token``'s login when given: the dispatcher
        checks that login again when the command runs (``stale_login``), after the body
        arrived, so a user deleted meanwhile and its id given to another user does not run
        it as that user."""
        client = request.client
        address = f"{client.host}:{client.port}" if client else "unknown"
        session = self.shard.open_session(address, TRANSPORT_HTTP)
        if token is not None:
            session.user_id, session.user_created_at = token.user_id, token.user_created_at
            session.token_name = token.token_name
        return session

    async def body(self, request: Request, kind: type, before_login: bool = False) -> Any:
        """The decoded JSON body (``before_login``: held to the unauthenticated limit).
        Raises IggyError (415 via UNSUPPORTED marker), BodyTooLarge or msgspec errors."""
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != JSON_TYPE:
            raise UnsupportedMediaType(content_type or "none")
        raw = await (unauthenticated_body(request, self.shard.limits.frames.max_unauthenticated)
                     if before_login else request.body())
        try:
            return msgspec.json.decode(raw, type=kind)
        except (UnicodeDecodeError, msgspec.DecodeError):
            refuse_invalid_utf8(raw)
            raise
        except RecursionError:  # msgspec decodes nested values recursively
            raise msgspec.DecodeError("JSON nested too deeply") from None

    async def execute(self, session: Any, req: Any) -> Any:
        """Run ``req``; the typed reply value (None for empty). Raises IggyError."""
        result = self.shard.dispatcher.execute(session, req)
        if inspect.isawaitable(result):
            result = await result
        spec = COMMANDS[type(req).CODE]
        if spec.response is None:
            return None
        return decode_response(spec.code, payload_bytes(result))

    def reply(self, req: Any, value: Any, ok: int) -> Response:
        spec = COMMANDS[type(req).CODE]
        if spec.response is None:
            return Response(status_code=ok)
        if value is None:
            return JsonResponse(s.RESOURCE_NOT_FOUND_JSON, status_code=404)
        if isinstance(value, SnapshotFile):
            return Response(value.data, status_code=ok, media_type="application/zip")
        return JsonResponse(s.to_json(value), status_code=ok)

    def guarded(self, fn: Callable[[Request], Awaitable[Response]]) -> Callable[..., Any]:
        """Turn failures into the §14 error answers."""
        async def endpoint(request: Request) -> Response:
            try:
                return await fn(request)
            except AuthFailed as exc:
                log.debug("HTTP 401: %s", exc)
                return Response(status_code=401)
            except UnsupportedMediaType as exc:
                return JsonResponse(s.error_json(ErrorCode.INVALID_FORMAT,
                                                 f"expected Content-Type {JSON_TYPE}, got {exc}"),
                                    status_code=415)
            except msgspec.ValidationError as exc:  # JSON, not of the body's type: as axum
                return JsonResponse(s.error_json(ErrorCode.INVALID_FORMAT,
                                                 f"invalid JSON body: {exc}"), status_code=422)
            except msgspec.DecodeError as exc:  # not JSON
                return JsonResponse(s.error_json(ErrorCode.INVALID_FORMAT,
                                                 f"invalid JSON body: {exc}"), status_code=400)
            except BodyTooLarge as exc:
                return JsonResponse(s.error_json(ErrorCode.INVALID_FORMAT, str(exc)),
                                    status_code=413)
            except ClientDisconnect:  # the client left while sending its body: nobody to answer
                log.debug("HTTP %s %s: client gone mid-request", request.method, request.url.path)
                return Response(status_code=400)
            except Exception as exc:  # mapped as on every front end (core.connection)
                status = failure_status(f"HTTP {request.method} {request.url.path}", exc)
                if isinstance(exc, IggyError):
                    return error_response(status, exc.detail or None)
                return JsonResponse(s.error_json(status), status_code=500)
        return endpoint

    # -- generic command route ---------------------------------------------------------------
    def command(self, build: Builder, body_type: type | None, ok: int) -> Callable[..., Any]:
        async def run(request: Request) -> Response:
            token = self.bearer(request)
            body = await self.body(request, body_type) if body_type else None
            params = {name: path_parameter(value) for name, value in request.path_params.items()}
            req = build(Call(params, request.query_params, body))
            req.validate()  # as Iggy's HTTP API: field rules before permissions
            if not isinstance(req, SendMessages):  # build_send checks its own fields
                check_encodable(req)
            session = self.open(request, token)
            try:
                value = await self.execute(session, req)
            finally:
                self.shard.close_session(session)
            return await self.answer(req, value, ok)
        return self.guarded(run)

    async def answer(self, req: Any, value: Any, ok: int) -> Response:
        """``reply``, on the renderer thread for a big poll answer (module docstring)."""
        if isinstance(value, PolledMessages) and len(value.data) > RENDER_OFF_LOOP_BYTES:
            return await asyncio.get_running_loop().run_in_executor(
                self.renderer, self.reply, req, value, ok)
        return self.reply(req, value, ok)

    # -- special routes ------------------------------------------------------------------------
    async def identity(self, request: Request, login: Any) -> Response:
        session = self.open(request, None)
        try:
            info: IdentityInfo = await self.execute(session, login)
        finally:
            self.shard.close_session(session)
        token = self.jwt.issue(info.user_id, session.user_created_at, session.token_name)
        return JsonResponse(s.identity_json(info, token.token, token.expiry_s))

    async def login(self, request: Request) -> Response:
        body = await self.body(request, b.LoginBody, before_login=True)
        return await self.identity(request, LoginUser(body.username, body.password,
                                                      body.version, body.context))

    async def login_pat(self, request: Request) -> Response:
        body = await self.body(request, b.TokenBody, before_login=True)
        return await self.identity(request, LoginWithPersonalAccessToken(body.token))

    async def logout(self, request: Request) -> Response:
        self.jwt.revoke(self.bearer(request))
        return Response(status_code=204)

    async def refresh(self, request: Request) -> Response:
        body = await self.body(request, b.TokenBody, before_login=True)
        try:
            token = self.jwt.refresh(body.token, self.require_token_user)
        except IggyError:
            raise AuthFailed("refresh token invalid") from None
        return JsonResponse(s.identity_json(IdentityInfo(token.user_id), token.token,
                                            token.expiry_s))

    async def cluster_status(self, request: Request) -> Response:
        """lurcher only: what this node knows of the cluster (authenticated, any user)."""
        self.bearer(request)
        return JsonResponse(cluster_status(self.shard))

    async def metrics_text(self, request: Request) -> Response:
        from lurcher.transports.http.metrics import CONTENT_TYPE
        return Response(self.metrics.render(), media_type=CONTENT_TYPE)

    def routes(self) -> list[Route]:
        routes = [Route("/", _root, methods=["GET"])]
        special = {"ping": _pong, "login_user": self.guarded(self.login),
                   "logout_user": self.guarded(self.logout),
                   "login_with_personal_access_token": self.guarded(self.login_pat)}
        for name, endpoint in special.items():  # before the others: /users/{user_id}
            rest = by_name[name].rest
            assert rest is not None and name in SPECIAL_ROUTES
            routes.append(Route(rest.path, endpoint, methods=[rest.method]))
        routes.append(Route("/users/refresh-token", self.guarded(self.refresh),
                            methods=["POST"]))
        routes.append(Route(CLUSTER_STATUS_ROUTE.path, self.guarded(self.cluster_status),
                            methods=[CLUSTER_STATUS_ROUTE.method]))
        if self.metrics is not None:
            routes.append(Route(self.metrics_path, self.metrics_text, methods=["GET"]))
        for method, path, build, body_type, ok in COMMAND_ROUTES:
            routes.append(Route(path, self.command(build, body_type, ok), methods=[method],
                                name=f"{method} {path}"))
        return routes


async def _root(request: Request) -> Response:
    return PlainTextResponse("Iggy API")


async def _pong(request: Request) -> Response:
    return PlainTextResponse("pong")


class UnsupportedMediaType(Exception):
    pass


class BodyTooLarge(Exception):
    pass


async def unauthenticated_body(request: Request, limit_bytes: int) -> bytes:
    """The body of a request made before any login, buffering at most ``limit_bytes``.
    Raises BodyTooLarge (413) as soon as it is declared or received larger."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit_bytes:
        raise BodyTooLarge(f"request body before login above {limit_bytes} bytes")
    chunks, received = [], 0
    async for chunk in request.stream():
        received += len(chunk)
        if received > limit_bytes:
            raise BodyTooLarge(f"request body before login above {limit_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


class BodyLimit:
    """ASGI middleware: refuse request bodies above ``limit_bytes`` with 413 and count
    responses by status in ``metrics`` (when given)."""

    def __init__(self, app: Any, limit_bytes: int, metrics: Any = None) -> None:
        self.app = app
        self.limit = limit_bytes
        self.metrics = metrics

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = self._counting(scope, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _too_large(send, self.limit)
            return
        seen = 0

        async def limited() -> dict:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise BodyTooLarge(f"request body above {self.limit} bytes")
            return message

        await self.app(scope, limited, send)

    def _counting(self, scope: dict, send: Callable) -> Callable:
        if self.metrics is None:
            return send
        counter = self.metrics.http_requests

        async def counted(message: dict) -> None:
            if message["type"] == "http.response.start":
                counter.labels(scope.get("method", "?"), str(message["status"])).inc()
            await send(message)
        return counted


async def _too_large(send: Callable, limit: int) -> None:
    body = msgspec.json.encode(s.error_json(ErrorCode.INVALID_FORMAT,
                                            f"request body above {limit} bytes"))
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", JSON_TYPE.encode()),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class MetricsPathTaken(FrontEndRefused):
    """``http.metrics.endpoint`` is a path another route answers GET at (one line)."""


def refuse_shadowed_metrics(api: HttpApi, routes: list[Any]) -> None:
    """Raise MetricsPathTaken when a route besides the metrics one answers GET at the metrics
    path: the first of the two would take every such request, so the API route (or the
    metrics) was never reached, without a word. Iggy 0.8's router refuses the same path
    twice at start (a panic); a template matching it (``/streams/{stream_id}``) counts too."""
    if api.metrics is None:
        return
    scope = {"type": "http", "method": "GET", "path": api.metrics_path, "root_path": ""}
    for route in routes:
        if (getattr(route, "endpoint", None) != api.metrics_text
                and route.matches(scope)[0] is Match.FULL):
            raise MetricsPathTaken(f"http.metrics.endpoint {api.metrics_path!r} is also the "
                                   f"path of GET {route.path}; choose another path")


def build_app(api: HttpApi, limit_bytes: int, cors: Cors | None, console: Any = None) -> Any:
    """The ASGI application: routes (and the web console's, when given), CORS (when
    enabled), body limit. Raises MetricsPathTaken."""
    routes: list[Any] = list(api.routes())
    if console is not None:
        routes.extend(console.routes())
    refuse_shadowed_metrics(api, routes)
    app: Any = EscapedSlashes(Starlette(routes=routes))
    if cors is not None and cors.enabled:
        from starlette.middleware.cors import CORSMiddleware
        app = CORSMiddleware(
            app, allow_origins=cors.allowed_origins, allow_methods=cors.allowed_methods,
            allow_headers=[h for h in cors.allowed_headers if h],
            expose_headers=[h for h in cors.exposed_headers if h],
            allow_credentials=cors.allow_credentials)
    return BodyLimit(app, limit_bytes, api.metrics)


__all__ = ["HttpApi", "build_app", "COMMAND_ROUTES"]
