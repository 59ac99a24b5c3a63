"""``consumer-group create|get|list|delete`` and ``consumer-offset get|set|delete``.

Offsets belong to a consumer (``--kind consumer``, the default) or a consumer group
(``--kind consumer-group``), as in the Iggy CLI. Any client reads a group's offset; only the
member owning a partition may store or delete it, so ``set`` and ``delete`` join a group
that has no members for their duration, and refuse a group that has some (joining and
leaving would move partitions between its running members, and the command's member would
not own the partition it names).
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.sdk.cli.commands.base import Sub, found, group, ident, leaf, topic_args
from lurcher.sdk.cli.errors import not_found
from lurcher.sdk.cli.exitcodes import CliError, ExitCode
from lurcher.sdk.cli.runtime import Run
from lurcher.sdk.client import Client
from lurcher.sdk.cli.values import identifier_arg, non_negative_int, offset_value

E = ErrorCode
GROUP_COLUMNS = ("ID", "NAME", "PARTITIONS", "MEMBERS")
KINDS = ("consumer", "consumer-group")


async def create(run: Run) -> None:
    a = run.args
    details = await (await run.client()).create_consumer_group(ident(a.stream), ident(a.topic),
                                                               a.name)
    run.out.note(f"consumer group '{a.name}' created with id {details.header.id}",
                 group=details.header)


async def get(run: Run) -> None:
    a = run.args
    details = found(await (await run.client()).get_consumer_group(
        ident(a.stream), ident(a.topic), ident(a.group)), run,
        E.CONSUMER_GROUP_ID_NOT_FOUND, E.CONSUMER_GROUP_NAME_NOT_FOUND, "group")
    if run.out.json:
        run.out.dump(details)
        return
    h = details.header
    run.out.item(list(zip(GROUP_COLUMNS, (h.id, h.name, h.partitions_count, h.members_count))))
    if details.members:
        run.out.write("")
        run.out.table(("MEMBER", "PARTITIONS"), [
            (m.id, ",".join(map(str, m.partitions))) for m in details.members])


async def list_(run: Run) -> None:
    groups = await (await run.client()).get_consumer_groups(ident(run.args.stream),
                                                            ident(run.args.topic))
    run.out.table(GROUP_COLUMNS, [(g.id, g.name, g.partitions_count, g.members_count)
                                  for g in groups], groups)


async def delete(run: Run) -> None:
    a = run.args
    await (await run.client()).delete_consumer_group(ident(a.stream), ident(a.topic),
                                                     ident(a.group))
    run.out.note(f"consumer group '{a.group}' deleted")


def _offset_target(a: argparse.Namespace) -> tuple:
    return (ident(a.consumer), ident(a.stream), ident(a.topic))


@contextlib.asynccontextmanager
async def _membership(run: Run) -> AsyncIterator[Client]:
    """The client; for ``--kind consumer-group`` the only member of that group meanwhile
    (a store or delete needs the member owning the partition). Raises CliError when the
    group has members."""
    a = run.args
    client = await run.client()
    if a.kind != "consumer-group":
        yield client
        return
    await _refuse_group_with_members(client, a)
    await client.join_consumer_group(ident(a.stream), ident(a.topic), ident(a.consumer))
    try:
        yield client
    finally:
        with contextlib.suppress(IggyError):
            await client.leave_consumer_group(ident(a.stream), ident(a.topic), ident(a.consumer))


async def _refuse_group_with_members(client: Client, a: argparse.Namespace) -> None:
    """Raises CliError when group ``a.consumer`` has members (an unknown group passes: the
    join names it)."""
    details = await client.get_consumer_group(ident(a.stream), ident(a.topic), ident(a.consumer))
    members = details.header.members_count if details is not None else 0
    if members:
        raise CliError(f"consumer group '{a.consumer}' has {members} member(s): only the one "
                       f"owning partition {a.partition} may change its offset; stop them "
                       "and run this again", ExitCode.ERROR)


async def get_offset(run: Run) -> None:
    a = run.args
    info = await (await run.client()).get_consumer_offset(*_offset_target(a), a.partition,
                                                          group=a.kind == "consumer-group")
    if info is None:
        raise not_found(E.CONSUMER_OFFSET_NOT_FOUND, a,
                        f"no offset stored for {a.kind} '{a.consumer}' on partition "
                        f"{a.partition} of topic '{a.topic}'")
    run.out.item([("consumer", f"{a.kind} {a.consumer}"), ("partition", info.partition_id),
                  ("current offset", info.current_offset),
                  ("stored offset", info.stored_offset)], info)


async def set_offset(run: Run) -> None:
    a = run.args
    async with _membership(run) as client:
        await client.store_consumer_offset(*_offset_target(a), a.offset, a.partition,
                                           group=a.kind == "consumer-group")
    run.out.note(f"offset {a.offset} stored for {a.kind} '{a.consumer}' on partition "
                 f"{a.partition}", offset=a.offset)


async def delete_offset(run: Run) -> None:
    a = run.args
    async with _membership(run) as client:
        await client.delete_consumer_offset(*_offset_target(a), a.partition,
                                            group=a.kind == "consumer-group")
    run.out.note(f"offset of {a.kind} '{a.consumer}' on partition {a.partition} deleted")


def _register_groups(sub: Sub) -> None:
    actions = group(sub, "consumer-group", "consumer group operations", ("g",))
    p = leaf(actions, "create", create, "create a consumer group", aliases=("c",))
    topic_args(p)
    p.add_argument("name", type=identifier_arg("name"), help="group name")
    for name, handler, text in (("get", get, "show a consumer group and its members"),
                                ("delete", delete, "delete a consumer group")):
        p = leaf(actions, name, handler, text, aliases=(name[0],))
        topic_args(p)
        p.add_argument("group", type=identifier_arg("group"), help="group id or name")
    topic_args(leaf(actions, "list", list_, "list the consumer groups of a topic",
                    aliases=("l",)))


def _offset_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("consumer", type=identifier_arg("consumer"),
                   help="consumer (or group) id or name")
    topic_args(p)
    p.add_argument("partition", type=non_negative_int, help="partition id")
    p.add_argument("-k", "--kind", choices=KINDS, default="consumer",
                   help="whose offset: a consumer (default) or a consumer group")


def register(sub: Sub) -> None:
    _register_groups(sub)
    actions = group(sub, "consumer-offset", "consumer offset operations", ("o",))
    _offset_args(leaf(actions, "get", get_offset, "show a stored offset", aliases=("g",)))
    p = leaf(actions, "set", set_offset, "store an offset", aliases=("s",))
    _offset_args(p)
    p.add_argument("offset", type=offset_value, help="offset to store")
    _offset_args(leaf(actions, "delete", delete_offset, "delete a stored offset",
                      aliases=("d",)))
