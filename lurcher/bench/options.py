"""``BenchOptions``: every setting of one benchmark run, as one typed, picklable value.

It travels from the command line to each actor process unchanged. Invariants after
``validate``: sizes and counts are positive, exactly one finish condition holds
(``message_batches`` or ``duration_s``; batches default to 1000 when neither is given), and
the transport is one this version can drive.
"""

from __future__ import annotations

import msgspec

from lurcher.sdk.connstring import ALLOWED_OPTIONS

# iggy-py: the official apache-iggy client against a lurcher server (pinned workloads);
# lurcher-cluster: our SDK against 3 lurcher nodes on loopback, actors spread over them
TARGETS = ("lurcher", "nats", "redis", "rabbitmq", "iggy-py", "lurcher-cluster")
LURCHER_TARGETS = ("lurcher", "iggy-py", "lurcher-cluster")
MAX_REPLICATION_FACTOR = 255  # CreateTopic's u8
TRANSPORTS = ("tcp", "quic", "ws", "http")
BUILT_TRANSPORTS = TRANSPORTS
DEFAULT_MESSAGE_BATCHES = 1000


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

    def validate(self) -> BenchOptions:
        """A copy with defaults resolved. Raises BenchOptionsError."""
        for name in ("producers", "consumers", "message_size", "messages_per_batch"):
            if getattr(self, name) < 1:
                raise BenchOptionsError(f"--{name.replace('_', '-')} must be at least 1")
        for name in ("streams", "partitions", "message_batches"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise BenchOptionsError(f"--{name.replace('_', '-')} must be at least 1")
        if self.target not in TARGETS:
            raise BenchOptionsError(f"unknown target {self.target!r}; one of {', '.join(TARGETS)}")
        if self.transport not in BUILT_TRANSPORTS:
            raise BenchOptionsError(f"transport {self.transport!r} is not available yet "
                                    f"(available: {', '.join(BUILT_TRANSPORTS)})")
        unknown = sorted(set(self.connection_options) - ALLOWED_OPTIONS[self.transport])
        if unknown:
            raise BenchOptionsError(f"--connection-option {unknown[0]} is not an option of "
                                    f"the {self.transport} transport")
        if not 0 <= self.replication_factor <= MAX_REPLICATION_FACTOR:
            raise BenchOptionsError(f"--replication-factor must be 0..{MAX_REPLICATION_FACTOR}")
        if self.replication_factor and self.target not in LURCHER_TARGETS:
            raise BenchOptionsError("--replication-factor applies to lurcher targets only")
        if self.message_batches is not None and self.duration_s is not None:
            raise BenchOptionsError("give --message-batches or --duration, not both")
        if self.duration_s is not None and self.duration_s <= 0:
            raise BenchOptionsError("--duration must be positive")
        if self.warmup_s < 0 or self.sampling_s <= 0:
            raise BenchOptionsError("--warmup must be >= 0 and --sampling-time > 0")
        if self.message_batches is None and self.duration_s is None:
            return msgspec.structs.replace(self, message_batches=DEFAULT_MESSAGE_BATCHES)
        return self

    @property
    def seed_batches(self) -> int:
        """Batches each seeding producer writes before a consumer-only workload."""
        return self.message_batches or DEFAULT_MESSAGE_BATCHES


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
