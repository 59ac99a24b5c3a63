"""``topic create|get|list|update|delete|purge``, ``partition create|delete``,
``segment delete``.

Topic create/update take the Iggy CLI positionals: ``STREAM NAME [PARTITIONS]
[COMPRESSION] [EXPIRY ...]`` (expiry words are joined: ``1day 1hour``), plus
``--max-topic-size`` and ``--replication-factor``; the long options ``--partitions``,
``--compression`` and ``--expiry`` may be used instead of the positionals.
"""

from __future__ import annotations

import argparse

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.sdk.api.streams import COMPRESSION, SERVER_DEFAULT
from lurcher.sdk.cli.commands.base import Sub, found, group, ident, leaf, topic_args
from lurcher.sdk.cli.exitcodes import CliError, ExitCode
from lurcher.sdk.cli.output import (
    COMPRESSION_NAMES,
    human_expiry,
    human_size,
    human_time,
)
from lurcher.sdk.cli.runtime import Run
from lurcher.sdk.cli.values import (expiry_us, identifier_arg, non_negative_int, positive_int,
                                    size_bytes, u8_value)

E = ErrorCode
TOPIC_COLUMNS = ("ID", "NAME", "CREATED", "PARTITIONS", "MESSAGES", "SIZE", "MAX SIZE",
                 "EXPIRY", "COMPRESSION", "REPLICATION")
PARTITION_COLUMNS = ("ID", "CREATED", "SEGMENTS", "CURRENT OFFSET", "SIZE", "MESSAGES")


def topic_row(h) -> tuple:
    return (h.id, h.name, human_time(h.created_at), h.partitions_count, h.messages_count,
            human_size(h.size_bytes), human_size(h.max_topic_size_bytes) if
            h.max_topic_size_bytes else "server_default", human_expiry(h.message_expiry_us),
            COMPRESSION_NAMES.get(h.compression, h.compression), h.replication_factor)


def topic_rows(headers) -> list[tuple]:
    return [topic_row(h) for h in headers]


def _settings(args: argparse.Namespace) -> dict:
    """compression / expiry / size / replication from positionals or options."""
    compression = args.compression_opt or args.compression or "none"
    if compression not in COMPRESSION:
        raise CliError(f"unknown compression '{compression}' (use {', '.join(COMPRESSION)})",
                       ExitCode.USAGE)
    words = args.expiry_opt or " ".join(args.expiry or []) or "server_default"
    try:
        expiry = expiry_us(words)
    except argparse.ArgumentTypeError as e:
        raise CliError(str(e), ExitCode.USAGE) from None
    return {"compression": compression, "message_expiry_us": expiry,
            "max_topic_size_bytes": args.max_topic_size,
            "replication_factor": args.replication_factor}


async def create(run: Run) -> None:
    a = run.args
    partitions = a.partitions_opt if a.partitions_opt is not None else a.partitions
    details = await (await run.client()).create_topic(
        ident(a.stream), a.name, partitions if partitions is not None else 1, **_settings(a))
    run.out.note(f"topic '{a.name}' created in stream '{a.stream}' with id "
                 f"{details.header.id} and {details.header.partitions_count} partition(s)",
                 topic=details.header)


async def update(run: Run) -> None:
    a = run.args
    await (await run.client()).update_topic(ident(a.stream), ident(a.topic), a.name,
                                            **_settings(a))
    run.out.note(f"topic '{a.topic}' in stream '{a.stream}' updated")


async def get(run: Run) -> None:
    a = run.args
    details = found(await (await run.client()).get_topic(ident(a.stream), ident(a.topic)),
                    run, E.TOPIC_ID_NOT_FOUND, E.TOPIC_NAME_NOT_FOUND, "topic")
    if run.out.json:
        run.out.dump(details)
        return
    run.out.item(list(zip(TOPIC_COLUMNS, topic_row(details.header))))
    run.out.write("")
    run.out.table(PARTITION_COLUMNS, [
        (p.id, human_time(p.created_at), p.segments_count, p.current_offset,
         human_size(p.size_bytes), p.messages_count) for p in details.partitions])


async def list_(run: Run) -> None:
    topics = await (await run.client()).get_topics(ident(run.args.stream))
    run.out.table(TOPIC_COLUMNS, topic_rows(topics), topics)


async def delete(run: Run) -> None:
    await (await run.client()).delete_topic(ident(run.args.stream), ident(run.args.topic))
    run.out.note(f"topic '{run.args.topic}' deleted from stream '{run.args.stream}'")


async def purge(run: Run) -> None:
    await (await run.client()).purge_topic(ident(run.args.stream), ident(run.args.topic))
    run.out.note(f"topic '{run.args.topic}' in stream '{run.args.stream}' purged")


async def create_partitions(run: Run) -> None:
    a = run.args
    await (await run.client()).create_partitions(ident(a.stream), ident(a.topic), a.count)
    run.out.note(f"{a.count} partition(s) added to topic '{a.topic}'", count=a.count)


async def delete_partitions(run: Run) -> None:
    a = run.args
    await (await run.client()).delete_partitions(ident(a.stream), ident(a.topic), a.count)
    run.out.note(f"last {a.count} partition(s) of topic '{a.topic}' deleted", count=a.count)


async def delete_segments(run: Run) -> None:
    a = run.args
    await (await run.client()).delete_segments(ident(a.stream), ident(a.topic), a.partition,
                                               a.count)
    run.out.note(f"{a.count} oldest segment(s) of partition {a.partition} deleted",
                 count=a.count)


def _topic_settings(p: argparse.ArgumentParser) -> None:
    p.add_argument("compression", nargs="?", help="none (default) or gzip")
    p.add_argument("expiry", nargs="*", help="message expiry: server_default (default), "
                   "unlimited, or a duration such as 15days or '1day 1hour'")
    p.add_argument("--compression", dest="compression_opt", metavar="ALGO")
    p.add_argument("--expiry", dest="expiry_opt", metavar="DURATION")
    p.add_argument("-m", "--max-topic-size", "--max-size", type=size_bytes,
                   default=SERVER_DEFAULT, metavar="SIZE",
                   help="server_default (default), unlimited, or a size such as 15GB")
    p.add_argument("-r", "--replication-factor", type=u8_value, default=0,
                   metavar="N", help="replication factor (0 = server default)")


def _register_topic(sub: Sub) -> None:
    actions = group(sub, "topic", "topic operations", ("t",))
    p = leaf(actions, "create", create, "create a topic", aliases=("c",),
             description="create a topic\n\nexamples:\n  lurcher topic create orders eu 3 gzip "
                         "7days -m 10GB\n  lurcher topic create 1 logs --partitions 2")
    p.add_argument("stream", type=identifier_arg("stream"), help="stream id or name")
    p.add_argument("name", type=identifier_arg("name"), help="topic name")
    p.add_argument("partitions", nargs="?", type=non_negative_int,
                   help="number of partitions (default 1)")
    p.add_argument("--partitions", dest="partitions_opt", type=non_negative_int, metavar="N")
    _topic_settings(p)
    p = leaf(actions, "update", update, "change a topic's name and settings", aliases=("u",))
    topic_args(p)
    p.add_argument("name", type=identifier_arg("name"), help="new (or same) topic name")
    _topic_settings(p)
    topic_args(leaf(actions, "get", get, "show one topic and its partitions", aliases=("g",)))
    leaf(actions, "list", list_, "list the topics of a stream", aliases=("l",)).add_argument(
        "stream", help="stream id or name")
    topic_args(leaf(actions, "delete", delete, "delete a topic", aliases=("d",)))
    topic_args(leaf(actions, "purge", purge, "remove every message of a topic",
                    aliases=("p",)))


def register(sub: Sub) -> None:
    _register_topic(sub)
    actions = group(sub, "partition", "partition operations", ("p",))
    for name, handler, text in (("create", create_partitions, "add partitions to a topic"),
                                ("delete", delete_partitions, "remove the last partitions")):
        p = leaf(actions, name, handler, text, aliases=(name[0],))
        topic_args(p)
        p.add_argument("count", type=positive_int, help="number of partitions")
    actions = group(sub, "segment", "segment operations", ("seg",))
    p = leaf(actions, "delete", delete_segments, "delete the oldest segments of a partition",
             aliases=("d",))
    topic_args(p)
    p.add_argument("partition", type=non_negative_int, help="partition id")
    p.add_argument("count", type=positive_int, help="number of segments")
