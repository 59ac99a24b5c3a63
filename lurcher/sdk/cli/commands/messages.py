"""``message send`` and ``message poll`` (with ``--follow``).

Send: messages come from the arguments, else ``--input-file``, else standard input; one
message per line (empty lines skipped, a trailing CR dropped), or the whole input as one
message with ``--raw``. They are sent in requests of at most ``--batch-size`` messages (and
about ``BATCH_BYTES``) as the input is read, so memory holds one request, whatever the
input's length; a line, or a ``--raw`` input, over the largest message (64 MB) is refused
without being read whole (the requests sent before it are counted in the error). With
``--id`` values (one per message) the count is checked before anything is sent. The same
headers (``-H key:kind:value``) go on each. Partitioning: ``--partition-id``,
``--message-key`` or balanced (the default).

Poll: one strategy of ``--offset``, ``--timestamp``, ``--first``, ``--last``, ``--next``
(the default). ``--group NAME`` polls as a member of that consumer group (created when
missing, as the SDK's ``Consumer`` does; joined for the command, left afterwards). ``--follow``
keeps polling: for a plain consumer it continues from the offset after the last message it
printed (on the partition that answered); for a group it polls ``next`` with auto-commit so the
group makes progress. It waits ``--interval`` seconds after an empty poll, and stops on Ctrl-C,
SIGTERM or after ``--max`` messages (exit 0). Output formats: text, json (one object per line),
hex, payload (raw payload bytes, one per line), to stdout or ``--output-file``; text shows
control characters in payloads and headers as escapes (``\\n``, ``\\x1b``: one line per message,
nothing sent to the terminal as a command). Header keys are named as ``headers.key_text`` names
them (a UTF-8 string key as itself, any other ``<kind>:<value>``), so no two keys read alike.
``flush`` is FlushUnsavedBuffer (``--fsync`` also fsyncs).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import math
import signal
import sys
from collections.abc import Callable, Iterator
from typing import BinaryIO

from lurcher.core.wire.batch import MAX_PAYLOAD_BYTES
from lurcher.core.wire.headers import key_text
from lurcher.core.wire.values.polling import PollingKind, PollingStrategy
from lurcher.sdk.consumer import join_group
from lurcher.sdk.cli.commands.base import Sub, group, ident, leaf, topic_args
from lurcher.sdk.cli.exitcodes import CliError, ExitCode
from lurcher.sdk.cli.output import iso_time, Output, printable
from lurcher.sdk.cli.runtime import Run
from lurcher.sdk.cli.values import (
    headers,
    identifier_arg,
    message_id,
    non_negative_int,
    offset_value,
    positive_int,
    seconds_value,
    timestamp_us,
)
from lurcher.sdk.messages import ReceivedMessage

DEFAULT_BATCH = 1000
BATCH_BYTES = 8 * 1024 * 1024  # a request of input lines is sent once it holds this much
POLL_COUNT = 1
FOLLOW_POLL_COUNT = 100
FOLLOW_INTERVAL_S = 0.2
FORMATS = ("text", "json", "hex", "payload")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


# -- send --------------------------------------------------------------------------------

@contextlib.contextmanager
def _input(a: argparse.Namespace) -> Iterator[BinaryIO]:
    """``--input-file`` opened, else standard input. Raises CliError(INPUT)."""
    if a.input_file is None:
        yield sys.stdin.buffer
        return
    try:
        f = open(a.input_file, "rb")
    except OSError as e:
        raise _unreadable(a, e) from None
    with f:
        yield f


def _unreadable(a: argparse.Namespace, e: OSError) -> CliError:
    return CliError(f"cannot read {a.input_file or 'standard input'}: {e.strerror or e}",
                    ExitCode.INPUT)


def _too_big(what: str) -> CliError:
    return CliError(f"{what} is over the largest message ({MAX_PAYLOAD_BYTES} bytes)",
                    ExitCode.INPUT)


def _raw_message(f: BinaryIO) -> Iterator[bytes]:
    """The whole input as one message (none when empty); never reads past the limit."""
    data = f.read(MAX_PAYLOAD_BYTES + 1)
    if len(data) > MAX_PAYLOAD_BYTES:
        raise _too_big("the input")
    if data:
        yield data


def _lines(f: BinaryIO) -> Iterator[bytes]:
    """The non-empty lines, a trailing CR dropped; each read holds at most one message (a
    line past the limit is refused, not read whole)."""
    while line := f.readline(MAX_PAYLOAD_BYTES + 2):
        line = line.removesuffix(b"\n").removesuffix(b"\r")
        if len(line) > MAX_PAYLOAD_BYTES:
            raise _too_big("a line of the input")
        if line:
            yield line


def _read(a: argparse.Namespace) -> Iterator[bytes]:
    """The messages of the input, read as they are asked for. Raises CliError(INPUT)."""
    with _input(a) as f:
        try:
            yield from (_raw_message(f) if a.raw else _lines(f))
        except OSError as e:
            raise _unreadable(a, e) from None


def batches(a: argparse.Namespace) -> Iterator[list[bytes]]:
    """The messages to send (see the module docstring) in requests of at most
    ``--batch-size`` messages and about ``BATCH_BYTES``; only one request's worth of input
    is held at a time. Raises CliError(INPUT) (empty input, a message over the limit)."""
    messages = iter([m.encode() for m in a.messages]) if a.messages else _read(a)
    batch: list[bytes] = []
    size = sent = 0
    for message in messages:
        batch.append(message)
        size += len(message)
        if len(batch) == a.batch_size or size >= BATCH_BYTES:
            sent += len(batch)
            yield batch
            batch, size = [], 0
    if batch or not sent:
        if not batch:
            raise CliError("no messages to send (empty input)", ExitCode.INPUT)
        yield batch


def _with_ids(a: argparse.Namespace) -> Iterator[tuple[list[bytes], list | None]]:
    """``batches`` paired with their ``--id`` values. With ids the message count is checked
    before anything is sent (reading stops one message past the ids given)."""
    if not a.id:
        yield from ((batch, None) for batch in batches(a))
        return
    held: list[bytes] = []
    for batch in batches(a):
        held += batch
        if len(held) > len(a.id):
            break
    if len(held) != len(a.id):
        known = a.messages or len(held) <= len(a.id)
        count = f"{len(a.messages or held)}" if known else f"more than {len(a.id)}"
        raise CliError(f"{len(a.id)} --id value(s) for {count} message(s)", ExitCode.USAGE)
    for start in range(0, len(held), a.batch_size):
        yield held[start:start + a.batch_size], a.id[start:start + a.batch_size]


def _partitioning(a: argparse.Namespace) -> int | str | None:
    if a.partition_id is not None:
        return a.partition_id
    return a.message_key


async def send(run: Run) -> None:
    a = run.args
    header_map = dict(h for group_ in a.header or [] for h in group_) or None
    sent = 0
    try:
        for data, ids in _with_ids(a):
            client = await run.client()
            await client.send_messages(ident(a.stream), ident(a.topic), data,
                                       _partitioning(a), ids=ids, headers=header_map)
            sent += len(data)
    except CliError as e:
        if sent:
            e.message += f" ({sent} message(s) before it were sent)"
        raise
    run.out.note(f"sent {sent} message(s) to topic '{a.topic}' of stream '{a.stream}'",
                 sent=sent)


# -- poll output -------------------------------------------------------------------------

def _plain(value: object) -> object:
    """A header key or value for JSON: bytes as hex, a float that is not finite as its
    text ("nan", "inf", "-inf": JSON has no such numbers), anything else as it is."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def header_dict(m: ReceivedMessage) -> dict[str, object]:
    """The message's headers by key text (``headers.key_text``, as Spark and the MCP tools
    name them: a UTF-8 string key as itself, others ``<kind>:<value>``, so keys of different
    kinds never meet), values as ``_plain``."""
    return {key_text(k): _plain(v.to_python()) for k, v in m.headers.items()}


def message_record(m: ReceivedMessage) -> dict[str, object]:
    record: dict[str, object] = {
        "partition_id": m.partition_id, "offset": m.offset, "id": m.id,
        "timestamp": m.timestamp, "origin_timestamp": m.origin_timestamp,
        "checksum": m.checksum, "headers": header_dict(m)}
    try:
        record["payload"] = m.payload.decode()
    except UnicodeDecodeError:
        record["payload"] = None
    record["payload_base64"] = base64.b64encode(m.payload).decode()
    return record


def _line(m: ReceivedMessage, payload: str, show_headers: bool) -> str:
    text = f"[partition {m.partition_id} offset {m.offset} {iso_time(m.timestamp)}] {payload}"
    if show_headers and m.user_headers:
        pairs = ", ".join(f"{k}={v}" for k, v in header_dict(m).items())
        text += "  {" + printable(pairs) + "}"
    return text


Printer = Callable[[ReceivedMessage], None]


def printer(fmt: str, show_headers: bool, out: Output) -> Printer:
    stream = out.stream

    def text(m: ReceivedMessage) -> None:
        out.write(_line(m, printable(m.payload.decode(errors="backslashreplace")),
                        show_headers))

    def hex_(m: ReceivedMessage) -> None:
        out.write(_line(m, m.payload.hex(), show_headers))

    def js(m: ReceivedMessage) -> None:
        out.write(json.dumps(message_record(m), ensure_ascii=False))

    def payload(m: ReceivedMessage) -> None:
        stream.flush()
        stream.buffer.write(m.payload + b"\n")
        stream.buffer.flush()

    return {"text": text, "hex": hex_, "json": js, "payload": payload}[fmt]


# -- poll --------------------------------------------------------------------------------

def strategy_of(a: argparse.Namespace) -> PollingStrategy:
    if a.offset is not None:
        return PollingStrategy.offset(a.offset)
    if a.timestamp is not None:
        return PollingStrategy.timestamp(a.timestamp)
    if a.first:
        return PollingStrategy.first()
    if a.last:
        return PollingStrategy.last()
    return PollingStrategy.next()


class Poller:
    """One poll target (stream, topic, partition, consumer) and its moving strategy."""

    def __init__(self, run: Run, out: Output) -> None:
        a = run.args
        self.run = run
        self.stream, self.topic = ident(a.stream), ident(a.topic)
        self.is_group = a.group is not None
        self.consumer = ident(a.group) if self.is_group else ident(a.consumer)
        self.partition = a.partition
        self.strategy = strategy_of(a)
        self.auto_commit = a.auto_commit
        self.print = printer(a.format or ("json" if run.out.json else "text"),
                             a.show_headers, out)

    async def poll(self, count: int) -> list[ReceivedMessage]:
        client = await self.run.client()
        polled = await client.poll_messages(self.stream, self.topic, self.partition,
                                            self.strategy, count, self.auto_commit,
                                            consumer=self.consumer, group=self.is_group)
        return [ReceivedMessage.of(polled.partition_id, m) for m in polled.messages()]

    def advance(self, got: list[ReceivedMessage]) -> None:
        """Where the next follow poll starts (see the module docstring)."""
        if self.is_group:
            self.strategy, self.auto_commit = PollingStrategy.next(), True
        elif got:
            self.partition = got[-1].partition_id
            self.strategy = PollingStrategy.offset(got[-1].offset + 1)
        elif self.strategy.kind == PollingKind.LAST:
            self.strategy = PollingStrategy.first()  # "last" is empty only on an empty partition


async def _follow(poller: Poller, a: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    remaining = a.max
    batch = a.count or FOLLOW_POLL_COUNT
    if poller.is_group:
        poller.auto_commit = True
    try:
        while not stop.is_set() and (remaining is None or remaining > 0):
            got = await poller.poll(batch if remaining is None else min(batch, remaining))
            for m in got:
                poller.print(m)
            if remaining is not None:
                remaining -= len(got)
            poller.advance(got)
            if not got:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), a.interval)
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)


@contextlib.contextmanager
def poll_output(run: Run):
    """Where polled messages go: ``--output-file`` (created or truncated), else stdout."""
    path = run.args.output_file
    if path is None:
        yield run.out
        return
    try:
        stream = open(path, "w", encoding="utf-8")
    except OSError as e:
        raise CliError(f"cannot write {path}: {e.strerror}", ExitCode.USAGE) from None
    with stream:
        yield Output(run.out.mode, run.out.quiet, stream)


async def poll(run: Run) -> None:
    with poll_output(run) as out:
        await _poll(run, Poller(run, out))


async def _poll(run: Run, poller: Poller) -> None:
    a = run.args
    client = await run.client()
    if poller.is_group:  # created when missing, as the SDK's Consumer does
        await join_group(client, poller.stream, poller.topic, poller.consumer)
    try:
        if a.follow:
            await _follow(poller, a)
            return
        count = a.count or POLL_COUNT
        got = await poller.poll(count if a.max is None else min(count, a.max))
        for m in got:
            poller.print(m)
        if not got and not run.out.quiet and not run.out.json:
            print("no messages", file=sys.stderr)
    finally:
        if poller.is_group:
            with contextlib.suppress(Exception):
                await client.leave_consumer_group(poller.stream, poller.topic, poller.consumer)


async def flush(run: Run) -> None:
    a = run.args
    await (await run.client()).flush_unsaved_buffer(ident(a.stream), ident(a.topic),
                                                    a.partition, a.fsync)
    run.out.note(f"flushed partition {a.partition} of {a.stream}/{a.topic}"
                 + (" (fsync)" if a.fsync else ""))


# -- parsers -----------------------------------------------------------------------------

def _send_parser(actions: Sub) -> None:
    p = leaf(actions, "send", send, "send messages", aliases=("s",), description=(
        "send messages\n\nexamples:\n  lurcher message send orders eu 'hello' 'world'\n"
        "  cat events.txt | lurcher message send orders eu --partition-id 2\n"
        "  lurcher message send orders eu --raw --input-file blob.bin\n"
        "  lurcher message send orders eu -H source:string:web -H n:uint32:7 'hi'"))
    topic_args(p)
    p.add_argument("messages", nargs="*", help="messages (default: read standard input)")
    p.set_defaults(rest_into="messages")
    where = p.add_mutually_exclusive_group()
    where.add_argument("-p", "--partition-id", "--partition", type=non_negative_int,
                       metavar="ID", help="send to this partition")
    where.add_argument("-k", "--message-key", "--key", metavar="KEY",
                       help="partition by this key")
    where.add_argument("-b", "--balanced", action="store_true",
                       help="let the server balance (default)")
    p.add_argument("-H", "--header", type=headers, action="append", metavar="KEY:KIND:VALUE",
                   help="header for every message (repeatable, or comma-separated)")
    p.add_argument("--id", type=message_id, action="append", metavar="ID",
                   help="message id (number or UUID); one per message")
    p.add_argument("-f", "--input-file", "--file", metavar="PATH",
                   help="read messages from a file instead of standard input")
    p.add_argument("--raw", action="store_true",
                   help="the whole input is one message (default: one per line)")
    p.add_argument("--batch-size", type=positive_int, default=DEFAULT_BATCH, metavar="N",
                   help=f"messages per request (default {DEFAULT_BATCH})")


def _poll_parser(actions: Sub) -> None:
    p = leaf(actions, "poll", poll, "poll messages", aliases=("p",), description=(
        "poll messages\n\nexamples:\n  lurcher message poll orders eu 0 --first -c 10\n"
        "  lurcher message poll orders eu 0 --offset 42 --format hex\n"
        "  lurcher message poll orders eu --group billing --follow --format json"))
    topic_args(p)
    p.add_argument("partition", nargs="?", type=non_negative_int,
                   help="partition id (default: chosen by the server)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--offset", type=offset_value, metavar="N", help="from this offset")
    how.add_argument("--timestamp", type=timestamp_us, metavar="TIME",
                     help="from this time (microseconds or ISO-8601)")
    how.add_argument("-f", "--first", action="store_true", help="from the first message")
    how.add_argument("-l", "--last", action="store_true", help="the last messages")
    how.add_argument("-n", "--next", action="store_true",
                     help="after the consumer's stored offset (default)")
    p.add_argument("-c", "--count", "-m", "--message-count", type=positive_int, metavar="N",
                   help=f"messages per poll (default {POLL_COUNT}; "
                        f"{FOLLOW_POLL_COUNT} with --follow)")
    p.add_argument("--consumer", default="0", metavar="ID", type=identifier_arg("--consumer"),
                   help="consumer id or name (default 0)")
    p.add_argument("-g", "--group", metavar="GROUP", type=identifier_arg("--group"),
                   help="poll as a member of this consumer group (created when missing)")
    p.add_argument("-a", "--auto-commit", action="store_true",
                   help="store the consumer offset after polling")
    p.add_argument("-s", "--show-headers", action="store_true", help="print user headers")
    p.add_argument("--format", choices=FORMATS,
                   help="text (default), json (one object per line), hex, payload")
    p.add_argument("-F", "--follow", action="store_true",
                   help="keep polling and print messages as they arrive")
    p.add_argument("--interval", type=seconds_value, default=FOLLOW_INTERVAL_S,
                   metavar="SECONDS",
                   help=f"wait after an empty poll with --follow (default {FOLLOW_INTERVAL_S})")
    p.add_argument("--max", type=positive_int, metavar="N", help="stop after N messages")
    p.add_argument("--output-file", metavar="PATH",
                   help="write the messages (in --format) to this file instead of stdout")


def _flush_parser(actions: Sub) -> None:
    p = leaf(actions, "flush", flush, "write a partition's unsaved messages to disk",
             description="write a partition's unsaved messages to disk (FlushUnsavedBuffer)"
                         "\n\nexample:\n  lurcher message flush orders eu 0 --fsync")
    topic_args(p)
    p.add_argument("partition", type=non_negative_int, help="partition id")
    p.add_argument("--fsync", action="store_true", help="also fsync the partition's files")


def register(sub: Sub) -> None:
    actions = group(sub, "message", "send and poll messages", ("m",))
    _send_parser(actions)
    _poll_parser(actions)
    _flush_parser(actions)
