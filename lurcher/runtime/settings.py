"""The server configuration, typed: one frozen msgspec Struct per section of ``server.toml``.

``decode`` turns the merged tables (packaged defaults <- file <- environment, see
``runtime.config``) into a ``ServerConfig`` once at start; everything below the loader reads
typed attributes (``config.typed.system.segment.size``) and never a dotted string.

Invariants: no field has a default: the packaged ``configs/server.toml`` is the one source
of default values, so a key missing from it fails ``decode`` (a test decodes the packaged
defaults). ``[cluster]`` is the one exception: its Struct belongs to ``lurcher.cluster`` and
a test proves its defaults equal the packaged ones. Unknown keys are refused
(``forbid_unknown_fields``). A ``Bytes`` field accepts a byte count or "1 GiB" and holds
bytes; a ``Micros`` field accepts µs or "30 s"/"none" and holds microseconds (``U64_MAX``
for none); both are plain ints, parsed by ``core.wire.units`` before msgspec converts the
tables (``_quantities``). ``system.segment.page_cache_window`` is a size or "auto", resolved
there to bytes for this machine (``core.log.host_memory``). A decode error is one line
naming the key.
"""

from __future__ import annotations

import functools
import re
from typing import Annotated, Any, Callable, Iterator, get_args, get_origin, get_type_hints

import msgspec

from lurcher.cluster.config import ClusterConfig, ClusterConfigError, decode_cluster
from lurcher.core.idle_poll import MAX_IDLE_POLL_S
from lurcher.core.log.config import GIB, MAX_SEGMENT_SIZE_BYTES
from lurcher.core.log.host_memory import parse_page_cache_window
from lurcher.core.quic import MAX_DATAGRAM_BYTES, SMALLEST_DATAGRAM_BYTES, STREAM_COUNT_MAX
from lurcher.core.wire import units
from lurcher.core.wire.buffer import U32_MAX
from lurcher.logsetup import MAX_BACKUPS


class Quantity:
    """Marks an int field written in human units, with the parser that reads them;
    ``also``: a word the parser takes besides the units (shown in errors)."""

    def __init__(self, what: str, parse: Callable[[int | str], int], also: str = "") -> None:
        self.what, self.parse, self.also = what, parse, also


# A size in bytes, written as a count or as "64 MiB" ("unlimited": U64_MAX).
Bytes = Annotated[int, Quantity("size", units.parse_size)]
# A duration in microseconds, written as µs or "30 s" ("none": U64_MAX).
Micros = Annotated[int, Quantity("duration", units.parse_duration_us)]


class Section(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Base of every section: unknown keys refused, values immutable."""


# Shard processes at most: each is a process every metadata change waits for, linked to the
# others; 2**64 of them failed on a traceback, thousands exhausted the machine one by one.
MAX_SHARDS = 1024


class Sharding(Section):
    shards: Annotated[int, msgspec.Meta(ge=0, le=MAX_SHARDS)]
    heartbeat_interval: Micros
    heartbeat_timeout: Micros


Positive = msgspec.Meta(ge=1)


class Segment(Section):
    size: Annotated[Bytes, Positive]
    max_open_files: Annotated[int, msgspec.Meta(ge=2)]
    direct_io: bool
    page_cache_window: Annotated[int, Quantity("size", parse_page_cache_window, '"auto"')]
    reserve_ahead: Bytes


class Partition(Section):
    max_partitions: Annotated[int, msgspec.Meta(ge=1)]
    enforce_fsync: bool
    max_inflight_batches: Annotated[int, msgspec.Meta(ge=1)]
    inline_write_max_bytes: Bytes


class Topic(Section):
    message_expiry: Micros
    max_size: Bytes


class State(Section):
    enforce_fsync: bool


class Deduplication(Section):
    enabled: bool
    max_entries: Annotated[int, msgspec.Meta(ge=0)]
    expiry: Micros


class Logging(Section):
    level: str
    format: str
    file: str
    max_size: Bytes
    backups: Annotated[int, msgspec.Meta(ge=0, le=MAX_BACKUPS)]


# system.idle_poll at most (µs): see lurcher.core.idle_poll
MAX_IDLE_POLL_US = round(MAX_IDLE_POLL_S * 1_000_000)


class System(Section):
    path: str
    umask: str
    io: str
    idle_poll: Micros
    sharding: Sharding
    segment: Segment
    partition: Partition
    topic: Topic
    state: State
    message_deduplication: Deduplication
    logging: Logging


class Tls(Section):
    """``[<front end>.tls]``; ``[quic.certificate]`` has the same keys but ``enabled``."""
    enabled: bool
    self_signed: bool
    cert_file: str
    key_file: str


class Certificate(Section):
    self_signed: bool
    cert_file: str
    key_file: str


class TcpSocket(Section):
    nodelay: bool


class Tcp(Section):
    enabled: bool
    address: str
    socket_migration: bool
    socket: TcpSocket
    tls: Tls


class Cors(Section):
    enabled: bool
    allowed_methods: list[str]
    allowed_origins: list[str]
    allowed_headers: list[str]
    exposed_headers: list[str]
    allow_credentials: bool


class Jwt(Section):
    algorithm: str
    issuer: str
    audience: str
    valid_issuers: list[str]
    valid_audiences: list[str]
    access_token_expiry: Micros
    clock_skew: Micros
    not_before: Micros
    encoding_secret: str
    decoding_secret: str
    max_refreshes_per_user: Annotated[int, msgspec.Meta(ge=0)]


class Metrics(Section):
    enabled: bool
    endpoint: str


class Http(Section):
    enabled: bool
    address: str
    max_request_size: Annotated[Bytes, Positive]
    web_ui: bool
    cors: Cors
    jwt: Jwt
    metrics: Metrics
    tls: Tls


class Quic(Section):
    enabled: bool
    address: str
    max_idle_timeout: Micros
    # bounds: core.quic (1,200 every QUIC path carries; 65,507 the largest IPv4 UDP payload)
    initial_mtu: Annotated[int, Quantity("size", units.parse_size),
                           msgspec.Meta(ge=SMALLEST_DATAGRAM_BYTES, le=MAX_DATAGRAM_BYTES)]
    send_window: Annotated[int, Quantity("size", units.parse_size),
                           msgspec.Meta(ge=SMALLEST_DATAGRAM_BYTES)]
    receive_window: Annotated[int, Quantity("size", units.parse_size), msgspec.Meta(ge=1)]
    keep_alive_interval: Micros
    max_concurrent_bidi_streams: Annotated[int, msgspec.Meta(ge=1, le=STREAM_COUNT_MAX)]
    certificate: Certificate


class WebSocket(Section):
    enabled: bool
    address: str
    max_message_size: Annotated[Bytes, Positive]
    tls: Tls


class Unix(Section):
    enabled: bool
    path: str


class Auth(Section):
    # Argon2 takes its costs as u32 (argon2-cffi refused a larger one with a traceback)
    argon2_time_cost: Annotated[int, msgspec.Meta(ge=1, le=U32_MAX)]
    argon2_memory_cost_kib: Annotated[int, msgspec.Meta(ge=8, le=U32_MAX)]
    argon2_parallelism: Annotated[int, msgspec.Meta(ge=1)]
    login_free_attempts: Annotated[int, msgspec.Meta(ge=0)]
    login_backoff_base: Micros
    login_backoff_max: Micros
    login_backoff_reset: Micros
    login_backoff_tracked_keys: Annotated[int, msgspec.Meta(ge=1)]


class Cleaner(Section):
    enabled: bool
    interval: Micros


class PersonalAccessToken(Section):
    # 0 refused every token (not "no limit", as 0 is elsewhere); Iggy 0.8 refuses it at start
    max_tokens_per_user: Annotated[int, msgspec.Meta(ge=1)]
    cleaner: Cleaner


class Heartbeat(Section):
    enabled: bool
    interval: Micros


class ConsumerGroup(Section):
    rebalancing_timeout: Micros
    check_interval: Micros


class MessageCleaner(Section):
    cleaner_enabled: bool
    interval: Micros


class DataMaintenance(Section):
    messages: MessageCleaner


class Limits(Section):
    # 0 refused every such request (every login, every send), where 0 is "no cap" for
    # http_max_connections and binary_max_connections of the same section
    max_control_payload_bytes: Annotated[Bytes, Positive]
    max_send_payload_bytes: Annotated[Bytes, Positive]
    max_unauthenticated_payload_bytes: Annotated[Bytes, Positive]
    max_poll_reply_bytes: Bytes
    http_header_timeout: Micros
    login_timeout: Micros
    http_body_timeout: Micros
    http_body_min_rate: Bytes
    http_max_connections: Annotated[int, msgspec.Meta(ge=0)]
    binary_max_connections: Annotated[int, msgspec.Meta(ge=0)]


class ServerConfig(Section):
    system: System
    tcp: Tcp
    http: Http
    quic: Quic
    websocket: WebSocket
    unix: Unix
    auth: Auth
    personal_access_token: PersonalAccessToken
    heartbeat: Heartbeat
    consumer_group: ConsumerGroup
    data_maintenance: DataMaintenance
    cluster: ClusterConfig
    limits: Limits


def seconds(micros: int) -> float:
    """A typed duration in seconds; "none" (U64_MAX) is 0, which means "off" wherever a
    duration can be disabled."""
    return 0.0 if micros == units.U64_MAX else micros / 1e6


class SettingsError(ValueError):
    """The merged tables do not decode; the message is one line naming the key."""


def decode(tables: dict[str, Any]) -> ServerConfig:
    """The typed configuration of the merged tables. Raises SettingsError (one line)."""
    try:
        typed = msgspec.convert(_quantities(tables, ServerConfig, ""), ServerConfig)
        decode_cluster(tables["cluster"])
    except msgspec.ValidationError as exc:
        raise SettingsError(_one_line(str(exc))) from None
    except ClusterConfigError as exc:
        raise SettingsError(str(exc)) from None
    for rule in CROSS_CHECKS:
        problem = rule(typed)
        if problem:
            raise SettingsError(problem)
    return typed


# -- rules between keys, or on a value its type cannot express (one line each) ------------

def _heartbeats(c: ServerConfig) -> str | None:
    s = c.system.sharding
    if not 0 < s.heartbeat_interval < units.U64_MAX:
        return "system.sharding.heartbeat_interval must be above 0 and not none"
    if s.heartbeat_interval >= s.heartbeat_timeout:
        return ("system.sharding.heartbeat_timeout must be longer than heartbeat_interval "
                "(a shard beats once per interval)")
    return None


def _segment_size(c: ServerConfig) -> str | None:
    if c.system.segment.size > MAX_SEGMENT_SIZE_BYTES:
        return (f"system.segment.size must be at most 1 GiB ({MAX_SEGMENT_SIZE_BYTES} bytes), "
                f"not {c.system.segment.size}")
    return None


def _topic_max_size(c: ServerConfig) -> str | None:
    """The default max size of new topics is held to the rule CreateTopic holds an asked one
    to (at least the segment size): below it, every topic created with the server default
    was refused INVALID_TOPIC_SIZE. Iggy 0.8 refuses such a configuration at start too."""
    size, segment = c.system.topic.max_size, c.system.segment.size
    if size < segment and size != units.U64_MAX:
        return (f"system.topic.max_size must be at least system.segment.size ({segment} "
                f"bytes) or unlimited, not {size}")
    return None


MAX_POLL_REPLY_BYTES = GIB


def _idle_poll(c: ServerConfig) -> str | None:
    """Polling longer buys no latency, only a busy core (``core.idle_poll``)."""
    value = c.system.idle_poll
    if value > MAX_IDLE_POLL_US:
        shown = "none" if value == units.U64_MAX else f"{value} us"
        return (f"system.idle_poll must be at most {MAX_IDLE_POLL_US // 1000} ms, not "
                f"{shown}")
    return None


def _poll_reply(c: ServerConfig) -> str | None:
    """A poll's reply is built whole in memory: "unlimited" let one poll of a large partition
    take gigabytes, past the u32 length of a binary reply."""
    size = c.limits.max_poll_reply_bytes
    if size > MAX_POLL_REPLY_BYTES:
        return (f"limits.max_poll_reply_bytes must be at most 1 GiB ({MAX_POLL_REPLY_BYTES} "
                f"bytes), not {'unlimited' if size == units.U64_MAX else size}")
    return None


def _periodic_jobs(c: ServerConfig) -> str | None:
    """A periodic job that is on needs an interval: with 0 or none it never ran, without a
    word (0.8 refuses a zero interval of an enabled message or token cleaner). "none" turns
    the token cleaner off, as documented; the others have their own switch or none."""
    m, tokens, beat = c.data_maintenance.messages, c.personal_access_token.cleaner, c.heartbeat
    jobs = (  # (key, on, interval, "none" allowed, when)
        ("data_maintenance.messages.interval", m.cleaner_enabled, m.interval, False,
         " when cleaner_enabled is true"),
        ("personal_access_token.cleaner.interval", tokens.enabled, tokens.interval, True,
         " when the cleaner is enabled"),
        ("heartbeat.interval", beat.enabled, beat.interval, False, " when enabled is true"),
        ("consumer_group.check_interval", True, c.consumer_group.check_interval, False, ""),
    )
    for key, on, interval, none_allowed, when in jobs:
        never = interval >= units.U64_MAX and not none_allowed
        if on and (interval == 0 or never):
            return f"{key} must be above 0{'' if none_allowed else ' and not none'}{when}"
    return None


_HTTP_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 token: names, methods


def _cors(c: ServerConfig) -> str | None:
    """CORS lists go into response headers: a header name or method that is not a token, or
    an origin with a control character, failed every request carrying an Origin (an ASGI
    traceback, the connection dropped). Credentials with any origin let every site make
    credentialed requests. Iggy 0.8 stops at start on them too (InvalidConfiguration; its
    CORS layer panics on the last)."""
    cors = c.http.cors
    for key in ("allowed_methods", "allowed_headers", "exposed_headers"):
        bad = [v for v in getattr(cors, key) if v.strip() and not _HTTP_TOKEN.fullmatch(v)]
        if bad:
            return f"http.cors.{key}: {bad[0]!r} is not an HTTP token"
    bad = [v for v in cors.allowed_origins if any(ch < " " or ch == "\x7f" for ch in v)]
    if bad:
        return f"http.cors.allowed_origins: {bad[0]!r} holds a control character"
    if cors.allow_credentials and "*" in cors.allowed_origins:
        return ("http.cors.allow_credentials = true cannot go with allowed_origins \"*\" "
                "(any site could make credentialed requests): list the origins")
    return None


def _metrics_endpoint(c: ServerConfig) -> str | None:
    endpoint = c.http.metrics.endpoint
    if not endpoint.startswith("/"):
        return f"http.metrics.endpoint must be a path starting with '/', not {endpoint!r}"
    return None


def _argon2(c: ServerConfig) -> str | None:
    a = c.auth
    if a.argon2_parallelism > ARGON2_MAX_LANES:
        return f"auth.argon2_parallelism must be at most {ARGON2_MAX_LANES}"
    if a.argon2_memory_cost_kib < 8 * a.argon2_parallelism:
        return ("auth.argon2_memory_cost_kib must be at least 8 x argon2_parallelism "
                f"({8 * a.argon2_parallelism})")
    return None


def _jwt_secrets(c: ServerConfig) -> str | None:
    """HS256 (the one algorithm) signs and checks with one secret: a decoding_secret unlike
    the encoding_secret refused every token it had just issued (401). Iggy 0.8 only warns;
    either one alone serves as both (``transports.http.jwt.load_secret``)."""
    jwt = c.http.jwt
    if jwt.encoding_secret and jwt.decoding_secret and jwt.decoding_secret != jwt.encoding_secret:
        return ("http.jwt.decoding_secret must be empty or the same as encoding_secret "
                "(HS256 signs and checks tokens with one secret)")
    return None


def _jwt_expiry(c: ServerConfig) -> str | None:
    """A token's expiry is in whole seconds: one below 1 s issued tokens that expired when
    they were issued ("0 s" too; "none": they never expire)."""
    expiry = c.http.jwt.access_token_expiry
    if expiry < units.US_PER_S:
        return (f"http.jwt.access_token_expiry must be at least 1 s or none, not "
                f"{expiry / units.US_PER_S:g} s (a token's expiry is in whole seconds)")
    return None


def _jwt_claims(c: ServerConfig) -> str | None:
    """The server checks its own tokens' issuer and audience against valid_issuers and
    valid_audiences (each empty: the one it issues): one left out refused every token it
    issued (401)."""
    jwt = c.http.jwt
    for claim, value, valid in (("issuer", jwt.issuer, jwt.valid_issuers),
                                ("audience", jwt.audience, jwt.valid_audiences)):
        if valid and value not in valid:
            return (f"http.jwt.{claim} {value!r} must be one of valid_{claim}s "
                    f"{valid} (or that list empty): the server checks its own tokens against it")
    return None


def _nul_in_names(c: ServerConfig) -> str | None:
    """A file name or address holding a NUL reached the OS calls, which refuse it with a
    ValueError (a traceback at start: system.path, the TLS files, unix.path); every such
    key is named ``path``, ``file``, ``*_file`` or ``address``."""
    for key, value in _named_values(c, ""):
        leaf = key.rsplit(".", 1)[-1]
        if (leaf in ("path", "file", "address") or leaf.endswith("_file")) and "\0" in value:
            return f"{key} must not contain a NUL character"
    return None


def _named_values(section: msgspec.Struct, prefix: str) -> Iterator[tuple[str, str]]:
    """(dotted key, value) of every string key of ``section`` and the sections below it."""
    for name in section.__struct_fields__:
        value = getattr(section, name)
        if isinstance(value, msgspec.Struct):
            yield from _named_values(value, f"{prefix}{name}.")
        elif isinstance(value, str):
            yield prefix + name, value


CROSS_CHECKS: tuple[Callable[[ServerConfig], str | None], ...] = (
    _heartbeats, _segment_size, _topic_max_size, _idle_poll, _poll_reply, _periodic_jobs,
    _metrics_endpoint, _argon2, _jwt_secrets, _jwt_claims, _jwt_expiry, _cors, _nul_in_names)
ARGON2_MAX_LANES = 0xFF_FFFF  # RFC 9106: parallelism is 1 to 2^24 - 1


@functools.cache
def _fields(cls: type) -> dict[str, Any]:
    return get_type_hints(cls, include_extras=True)


def quantity_of(path: str) -> str | None:
    """"size" or "duration" when the dotted key ``path`` is written in such units (a
    ``Bytes``/``Micros`` field, or one marked the same way); else None."""
    mark = quantity_mark(path)
    return mark.what if mark is not None else None


def quantity_mark(path: str) -> Quantity | None:
    """The ``Quantity`` (kind and parser) of the dotted key ``path``; None if it has none."""
    cls: Any = ServerConfig
    *sections, key = path.split(".")
    for name in sections:
        cls = _fields(cls).get(name) if isinstance(cls, type) else None
    hint = _fields(cls).get(key) if isinstance(cls, type) else None
    marks = [m for m in get_args(hint)[1:] if isinstance(m, Quantity)]
    return marks[0] if marks and get_origin(hint) is Annotated else None


def _quantities(table: Any, cls: type, prefix: str) -> Any:
    """A copy of ``table`` with its ``Bytes``/``Micros`` values parsed into ints (other
    values untouched: msgspec judges them)."""
    if not isinstance(table, dict) or not issubclass(cls, Section):
        return table
    out = dict(table)
    for key, hint in _fields(cls).items():
        if key not in out:
            continue
        marks = [m for m in get_args(hint)[1:] if isinstance(m, Quantity)]
        if marks and get_origin(hint) is Annotated:
            out[key] = _parse(marks[0], out[key], prefix + key)
        elif isinstance(hint, type):
            out[key] = _quantities(out[key], hint, f"{prefix}{key}.")
    return out


def _parse(mark: Quantity, value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise SettingsError(f"{key}: expected a {mark.what}, got {value!r}")
    try:
        return mark.parse(value)
    except ValueError as exc:
        raise SettingsError(f"{key}: {exc}") from None


def _one_line(message: str) -> str:
    """msgspec's "what - at `$.a.b`" as "a.b: what" (the key first, as every other error)."""
    what, _, where = message.partition(" - at `$")
    key = where.rstrip("`").lstrip(".")
    return f"{key}: {what[:1].lower()}{what[1:]}" if key else what
