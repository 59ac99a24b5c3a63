"""The ``lurcher-bench`` command line.

    lurcher-bench WORKLOAD [options]            one workload on one --target
    lurcher-bench compare WORKLOAD [options]    the workload on lurcher, redis, nats, rabbitmq
                                                (or on --targets, e.g. a 3-node lurcher-cluster)
    lurcher-bench list                          the workloads

Exit status: 0 done, 2 bad options, 1 a run failed (missing peer binary, server did not
start, an actor failed). Errors are one line on stderr (an actor's traceback in full).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from lurcher.bench.options import (
    MAX_ACTORS,
    MAX_BATCH_WIRE_BYTES,
    MAX_MESSAGE_BATCHES,
    MAX_PARTITIONS_PER_REQUEST,
    MAX_PAYLOAD_BYTES,
    MAX_TIME_S,
    MESSAGE_OVERHEAD_BYTES,
    TARGETS,
    TRANSPORTS,
    BenchOptions,
    BenchOptionsError,
    target_options,
)
from lurcher.bench.workloads import WORKLOADS, layout, workload
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.units import parse_duration


COMMANDS_HELP = (
    "commands:\n"
    "  lurcher-bench WORKLOAD [options]           one workload on one --target\n"
    "  lurcher-bench compare WORKLOAD [options]   the workload on lurcher, Redis and NATS "
    "(needs nats-server and redis-server)\n"
    "  lurcher-bench list                         the workloads with their aliases\n\n"
    "workloads:\n" + "\n".join(f"  {w.name} ({w.alias})" for w in WORKLOADS.values()))


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        """A usage error: one line on stderr (not argparse's usage block), exit status 2."""
        self.exit(2, f"{self.prog}: {message} (see --help)\n")


def build_parser(compare: bool) -> argparse.ArgumentParser:
    prog = "lurcher-bench compare" if compare else "lurcher-bench"
    p = _Parser(
        prog=prog, description="Iggy's benchmark workloads against lurcher"
        + (", Redis and NATS side by side" if compare else " or a peer"),
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=COMMANDS_HELP)
    p.add_argument("workload", help="workload name or alias (see `lurcher-bench list`)")
    if not compare:
        p.add_argument("--target", choices=TARGETS, default="lurcher")
    a = p.add_argument
    a("--producers", "-p", type=int, default=1,
      help=f"producers / producing consumers (at most {MAX_ACTORS})")
    a("--consumers", "-c", type=int, default=1, help=f"at most {MAX_ACTORS}")
    a("--streams", "-s", type=int,
      help=f"default: per workload (pinned: one per actor); at most {MAX_ACTORS}")
    a("--partitions", type=int, help="partitions per stream (balanced default 24; at most "
      f"{MAX_PARTITIONS_PER_REQUEST})")
    a("--message-size", "-m", type=int, default=1000,
      help=f"payload bytes per message (at most {MAX_PAYLOAD_BYTES})")
    a("--messages-per-batch", "-P", type=int, default=1000,
      help=f"messages x (size + {MESSAGE_OVERHEAD_BYTES} bytes of header and index) must be "
           f"at most {MAX_BATCH_WIRE_BYTES} bytes, within the server's default 64 MiB "
           "SendMessages limit")
    volume = p.add_mutually_exclusive_group()
    volume.add_argument("--message-batches", "-b", type=int,
                        help=f"batches per actor (default 1000, at most {MAX_MESSAGE_BATCHES})")
    volume.add_argument("--duration", "-d", type=_duration,
                        help=f"run time, e.g. 10s (at most {MAX_TIME_S:.0f}s)")
    a("--warmup", "-w", type=_duration, default=0.0,
      help=f"warm-up time, e.g. 2s (at most {MAX_TIME_S:.0f}s)")
    a("--sampling-time", "-t", type=_duration, default=0.1,
      help=f"time-series bucket and server sampling interval (at most {MAX_TIME_S:.0f}s)")
    a("--transport", choices=TRANSPORTS, default="tcp", help="lurcher transport")
    a("--connection-option", action="append", default=[], metavar="KEY=VALUE",
      type=_key_value, help="an SDK option of the transport, as in a connection string "
      "(e.g. initial_mtu=1200 for quic); repeatable")
    a("--server-address", help="use this running server instead of starting one")
    a("--server-pid", type=int, help="pid of --server-address's server, to monitor it")
    a("--username", default="iggy")
    a("--password", default="iggy")
    a("--enforce-fsync", action="store_true",
      help="fsync before ack (lurcher enforce_fsync, redis appendfsync always, nats "
           "sync_interval always where supported)")
    a("--replication-factor", type=int, default=0, metavar="N",
      help="lurcher targets: the topics' replication factor (0: the server's default)")
    if compare:
        a("--targets", nargs="+", metavar="TARGET[:N]",
          help="targets to compare (default: lurcher redis nats rabbitmq); TARGET:N gives "
               "a lurcher target topics of replication factor N, e.g. lurcher "
               "lurcher-cluster:1 lurcher-cluster:3")
    a("--output-dir", "-o", default="bench-results")
    a("--no-progress", action="store_true")
    a("--no-charts", action="store_true")
    return p


def _key_value(text: str) -> tuple[str, str]:
    key, eq, value = text.partition("=")
    if not eq or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def to_options(ns: argparse.Namespace, target: str) -> BenchOptions:
    """Raises BenchOptionsError for an unknown workload."""
    return BenchOptions(
        workload=workload(ns.workload).name, target=target, producers=ns.producers,
        consumers=ns.consumers,
        streams=ns.streams, partitions=ns.partitions, message_size=ns.message_size,
        messages_per_batch=ns.messages_per_batch, message_batches=ns.message_batches,
        duration_s=ns.duration, warmup_s=ns.warmup, sampling_s=ns.sampling_time,
        transport=ns.transport, connection_options=dict(ns.connection_option),
        server_address=ns.server_address, server_pid=ns.server_pid,
        username=ns.username, password=ns.password, enforce_fsync=ns.enforce_fsync,
        replication_factor=ns.replication_factor, output_dir=ns.output_dir,
        progress=not ns.no_progress, charts=not ns.no_charts)


def _list() -> int:
    for w in WORKLOADS.values():
        print(f"{w.name:40} {w.alias:6} {w.about}")
    return 0


def _exit_on_sigterm() -> None:
    """SIGTERM unwinds like Ctrl-C, so the servers this run started are stopped."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["list"]:
        return _list()
    compare = argv[:1] == ["compare"]
    ns = build_parser(compare).parse_args(argv[1:] if compare else argv)
    try:
        options = to_options(ns, "lurcher" if compare else ns.target).validate()
        layout(options)
        for text in getattr(ns, "targets", None) or ():
            target_options(options, text)
    except BenchOptionsError as e:
        print(f"lurcher-bench: {e}", file=sys.stderr)
        return 2
    return _execute(options, compare, getattr(ns, "targets", None))


def _execute(options: BenchOptions, compare: bool, targets: list[str] | None = None) -> int:
    _exit_on_sigterm()
    from lurcher.bench.compare import run_compare
    from lurcher.bench.drivers import DriverUnavailable
    from lurcher.bench.run import run_benchmark
    from lurcher.bench.runner import ActorFailed
    from lurcher.bench.servers import ServerStartError
    try:
        if compare:
            run_compare(options, tuple(targets)) if targets else run_compare(options)
        else:
            run_benchmark(options)
    except (ServerStartError, DriverUnavailable, ActorFailed, BenchOptionsError) as e:
        print(f"lurcher-bench: {e}", file=sys.stderr)
        return 1
    except (IggyError, OSError) as e:  # cannot reach or log in to --server-address
        print(f"lurcher-bench: {options.server_address or 'server'}: {e}", file=sys.stderr)
        return 1
    except (ValueError, OverflowError) as e:  # last resort: an option no check above caught
        print(f"lurcher-bench: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
