"""``BenchOptions``: every setting of one benchmark run, as one typed, picklable value.

It travels from the command line to each actor process unchanged. Invariants after
``validate``: sizes and counts are positive and within the bench maxima below (a run never
creates more than ``MAX_ACTORS`` actor processes or streams, and one batch never exceeds the
server's default SendMessages limit), exactly one finish condition holds (``message_batches``
or ``duration_s``; batches default to 1000 when neither is given), the transport is one this
version can drive, its connection options parse, and ``server_address``/``server_pid`` are
well formed.
"""

from __future__ import annotations

import msgspec

from lurcher.core.wire.batch import HEADER_BYTES, INDEX_ENTRY_BYTES, MAX_PAYLOAD_BYTES
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.requests.topics.create_topic import MAX_PARTITIONS_PER_REQUEST
from lurcher.sdk.connstring import ALLOWED_OPTIONS, check_address, parse_option
from lurcher.core.wire.address import split_address

# iggy-py: the official apache-iggy client against a lurcher server (pinned workloads);
# lurcher-cluster: our SDK against 3 lurcher nodes on loopback, actors spread over them
TARGETS = ("lurcher", "nats", "redis", "rabbitmq", "iggy-py", "lurcher-cluster")
LURCHER_TARGETS = ("lurcher", "iggy-py", "lurcher-cluster")
MAX_REPLICATION_FACTOR = 255  # CreateTopic's u8
TRANSPORTS = ("tcp", "quic", "ws", "http")
BUILT_TRANSPORTS = TRANSPORTS
DEFAULT_MESSAGE_BATCHES = 1000
# Bench maxima, refused up front (see --help). Each actor is a process of its own.
MAX_ACTORS = 1000                       # --producers, --consumers and --streams
MAX_SEND_BYTES = 64 * 1024 * 1024       # the server's default limits.max_send_payload_bytes
SEND_ENVELOPE_BYTES = 4096              # SendMessages' ids, partitioning and count, rounded up
MAX_BATCH_WIRE_BYTES = MAX_SEND_BYTES - SEND_ENVELOPE_BYTES
MESSAGE_OVERHEAD_BYTES = HEADER_BYTES + INDEX_ENTRY_BYTES  # per message in a batch
MAX_MESSAGE_BATCHES = 10_000_000        # per actor: each batch keeps 24 bytes of results
MAX_TIME_S = 86_400.0                   # --duration, --warmup and --sampling-time: one day
MAX_NAME_BYTES = 255                    # --username and --password: LoginUser's u8 lengths


class BenchOptionsError(ValueError):
    """Options that cannot run together (the message says which and why)."""


class BenchOptions(msgspec.Struct, frozen=True, kw_only=True):
    workload: str
    target: str = "lurcher"
    producers: int = 1
    consumers: int = 1
    streams: int | None = None          # None: the workload's default
    partitions: int | None = None       # None: the workload's default
    message_size: int = 1000            # payload bytes per message
    messages_per_batch: int = 1000
    message_batches: int | None = None  # per actor; None with duration_s
    duration_s: float | None = None
    warmup_s: float = 0.0
    sampling_s: float = 0.1
    transport: str = "tcp"
    connection_options: dict[str, str] = {}  # SDK options of the transport (--connection-option)
    server_address: str | None = None   # None: start our own server on a temp data dir
    server_pid: int | None = None       # pid to monitor when server_address is given
    username: str = "iggy"
    password: str = "iggy"
    enforce_fsync: bool = False
    replication_factor: int = 0         # the topics' replication_factor (0: server default)
    output_dir: str = "bench-results"
    progress: bool = True
    charts: bool = True

    @property
    def batch_bytes(self) -> int:
        """Payload bytes of one batch."""
        return self.message_size * self.messages_per_batch

    @property
    def batch_wire_bytes(self) -> int:
        """Bytes of one batch inside SendMessages: each message's header, index entry and
        payload."""
        return self.messages_per_batch * (self.message_size + MESSAGE_OVERHEAD_BYTES)

    def validate(self) -> BenchOptions:
        """A copy with defaults resolved. Raises BenchOptionsError."""
        self._check_counts()
        self._check_batch()
        self._check_target()
        self._check_times()
        self._check_server()
        if self.message_batches is None and self.duration_s is None:
            return msgspec.structs.replace(self, message_batches=DEFAULT_MESSAGE_BATCHES)
        return self

    def _check_counts(self) -> None:
        limits = {"producers": MAX_ACTORS, "consumers": MAX_ACTORS, "streams": MAX_ACTORS,
                  "partitions": MAX_PARTITIONS_PER_REQUEST, "message_size": MAX_PAYLOAD_BYTES,
                  "messages_per_batch": None, "message_batches": MAX_MESSAGE_BATCHES}
        for name in limits:
            value = getattr(self, name)
            if value is not None:
                _check_range(name, value, 1, limits.get(name))

    def _check_batch(self) -> None:
        if self.batch_wire_bytes > MAX_BATCH_WIRE_BYTES:
            raise BenchOptionsError(
                f"--messages-per-batch x (--message-size + {MESSAGE_OVERHEAD_BYTES} "
                f"bytes of header and index) is {self.batch_wire_bytes} bytes; one batch must "
                f"fit the server's default SendMessages limit ({MAX_BATCH_WIRE_BYTES} bytes)")

    def _check_target(self) -> None:
        if self.target not in TARGETS:
            raise BenchOptionsError(f"unknown target {self.target!r}; one of {', '.join(TARGETS)}")
        if self.transport not in BUILT_TRANSPORTS:
            raise BenchOptionsError(f"transport {self.transport!r} is not available yet "
                                    f"(available: {', '.join(BUILT_TRANSPORTS)})")
        connection_fields(self)
        if not 0 <= self.replication_factor <= MAX_REPLICATION_FACTOR:
            raise BenchOptionsError(f"--replication-factor must be 0..{MAX_REPLICATION_FACTOR}")
        if self.replication_factor and self.target not in LURCHER_TARGETS:
            raise BenchOptionsError("--replication-factor applies to lurcher targets only")

    def _check_times(self) -> None:
        if self.message_batches is not None and self.duration_s is not None:
            raise BenchOptionsError("give --message-batches or --duration, not both")
        if self.duration_s is not None and self.duration_s <= 0:
            raise BenchOptionsError("--duration must be positive")
        if self.warmup_s < 0 or self.sampling_s <= 0:
            raise BenchOptionsError("--warmup must be >= 0 and --sampling-time > 0")
        for flag, value in (("duration", self.duration_s), ("warmup", self.warmup_s),
                            ("sampling-time", self.sampling_s)):
            if value is not None and value > MAX_TIME_S:
                raise BenchOptionsError(f"--{flag} must be at most {MAX_TIME_S:.0f} s (one day)")

    def _check_server(self) -> None:
        if self.server_pid is not None and self.server_pid < 1:
            raise BenchOptionsError(
                f"--server-pid must be a positive integer, got {self.server_pid}")
        for flag, value in (("username", self.username), ("password", self.password)):
            if len(value.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
                raise BenchOptionsError(f"--{flag} must be at most {MAX_NAME_BYTES} bytes")
        if self.server_address is None:
            return
        for address in self.server_address.split(","):  # a cluster: one per node
            try:
                split_address(address)
                check_address(address)
            except (ValueError, IggyError) as e:
                raise BenchOptionsError(f"--server-address: {_reason(e)}") from None

    @property
    def seed_batches(self) -> int:
        """Batches each seeding producer writes before a consumer-only workload."""
        return self.message_batches or DEFAULT_MESSAGE_BATCHES


def _check_range(name: str, value: int, low: int, high: int | None) -> None:
    flag = f"--{name.replace('_', '-')}"
    if value < low:
        raise BenchOptionsError(f"{flag} must be at least {low}")
    if high is not None and value > high:
        raise BenchOptionsError(f"{flag} must be at most {high}")


def _reason(error: Exception) -> str:
    return error.detail if isinstance(error, IggyError) else str(error)


def connection_fields(o: BenchOptions) -> dict:
    """``ClientConfig`` fields of ``o.connection_options`` (parsed as in a connection string;
    options without a field go to ``options`` as text). Raises BenchOptionsError."""
    fields: dict = {}
    extra: dict[str, str] = {}
    for key, value in o.connection_options.items():
        if key not in ALLOWED_OPTIONS[o.transport]:
            raise BenchOptionsError(f"--connection-option {key} is not an option of "
                                    f"the {o.transport} transport")
        try:
            parse_option(key, value, o.transport, fields, extra)
        except IggyError as e:
            raise BenchOptionsError(f"--connection-option {key}={value}: {_reason(e)}") from None
    _check_quic(o.transport, extra)
    return {**fields, "options": extra}


def _check_quic(transport: str, options: dict[str, str]) -> None:
    if transport != "quic":
        return
    from lurcher.core.quic import quic_settings
    try:
        quic_settings(options, plain_unit_s=1e-3)
    except ValueError as e:
        raise BenchOptionsError(f"--connection-option: {e}") from None


def target_options(o: BenchOptions, text: str) -> tuple[str, BenchOptions]:
    """(column label, options) of one ``--targets`` entry: a target, or ``TARGET:N`` for a
    lurcher target with topics of replication factor N (label ``TARGET-rfN``). Raises
    BenchOptionsError."""
    target, sep, factor = text.partition(":")
    if sep and not factor.isdigit():
        raise BenchOptionsError(f"--targets {text!r}: expected TARGET or TARGET:REPLICATION_FACTOR")
    replication = int(factor) if sep else o.replication_factor
    t_opts = msgspec.structs.replace(
        o, target=target, replication_factor=replication if target in LURCHER_TARGETS else 0,
        server_address=o.server_address if target == "lurcher" else None,
        server_pid=o.server_pid if target == "lurcher" else None)
    if sep and target not in LURCHER_TARGETS:
        raise BenchOptionsError(f"--targets {text!r}: a replication factor needs a lurcher target")
    return (f"{target}-rf{replication}" if sep else target), t_opts.validate()
