"""``stream create|get|list|update|delete|purge``."""

from __future__ import annotations

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.sdk.cli.commands.base import Sub, found, group, ident, leaf, stream_arg
from lurcher.sdk.cli.commands.topics import topic_rows, TOPIC_COLUMNS
from lurcher.sdk.cli.output import human_size, human_time
from lurcher.sdk.cli.runtime import Run
from lurcher.sdk.cli.values import identifier_arg

E = ErrorCode
STREAM_COLUMNS = ("ID", "NAME", "CREATED", "SIZE", "MESSAGES", "TOPICS")


def _row(h) -> tuple:
    return (h.id, h.name, human_time(h.created_at), human_size(h.size_bytes),
            h.messages_count, h.topics_count)


async def create(run: Run) -> None:
    details = await (await run.client()).create_stream(run.args.name)
    run.out.note(f"stream '{run.args.name}' created with id {details.header.id}",
                 stream=details.header)


async def get(run: Run) -> None:
    details = found(await (await run.client()).get_stream(ident(run.args.stream)), run,
                    E.STREAM_ID_NOT_FOUND, E.STREAM_NAME_NOT_FOUND, "stream")
    if run.out.json:
        run.out.dump(details)
        return
    run.out.item(list(zip(STREAM_COLUMNS, _row(details.header))))
    if details.topics:
        run.out.write("")
        run.out.table(TOPIC_COLUMNS, topic_rows(details.topics))


async def list_(run: Run) -> None:
    streams = await (await run.client()).get_streams()
    run.out.table(STREAM_COLUMNS, [_row(s) for s in streams], streams)


async def update(run: Run) -> None:
    await (await run.client()).update_stream(ident(run.args.stream), run.args.name)
    run.out.note(f"stream '{run.args.stream}' renamed to '{run.args.name}'")


async def delete(run: Run) -> None:
    await (await run.client()).delete_stream(ident(run.args.stream))
    run.out.note(f"stream '{run.args.stream}' deleted")


async def purge(run: Run) -> None:
    await (await run.client()).purge_stream(ident(run.args.stream))
    run.out.note(f"stream '{run.args.stream}' purged")


def register(sub: Sub) -> None:
    actions = group(sub, "stream", "stream operations", ("s",))
    leaf(actions, "create", create, "create a stream", aliases=("c",)).add_argument(
        "name", type=identifier_arg("name"), help="stream name")
    stream_arg(leaf(actions, "get", get, "show one stream and its topics", aliases=("g",)))
    leaf(actions, "list", list_, "list streams", aliases=("l",))
    p = leaf(actions, "update", update, "rename a stream", aliases=("u",))
    stream_arg(p)
    p.add_argument("name", type=identifier_arg("name"), help="new name")
    stream_arg(leaf(actions, "delete", delete, "delete a stream and everything in it",
                    aliases=("d",)))
    stream_arg(leaf(actions, "purge", purge, "remove every message of a stream",
                    aliases=("p",)))
