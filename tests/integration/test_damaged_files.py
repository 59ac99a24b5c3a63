"""A real server restarted over damaged partition files: it starts (one log line per repair,
no traceback), serves what is intact, and its consumers neither skip nor stall.

Damage planted while the server is stopped, as a crash or a careless hand leaves it: the
newest batch cut from the open segment (never written back before a power loss) below an
offset a consumer had stored; a sealed segment missing its last batch (offsets that are
not stored any more); files in the partition directory that look like segments but are not
named by a u64 offset; the last record of the metadata log damaged (cut at start as a torn
one), so a topic holding messages is unknown to the metadata; the open segment cut to
nothing and the sealed one deleted, so no message is left (offsets are still stored)."""

from __future__ import annotations

import asyncio
import shutil

import httpx
import pytest

from lurcher.sdk import Client, ErrorCode, IggyError
from tests.support.disk import partition_dirs, segments
from tests.support.server import run_server_to_exit

MESSAGE_BYTES = 64 + 5  # payloads "m-xyz"
CUT_WARNING = "stored offset 14 is past the last stored message (9): lower it"


def payloads(first: int, n: int) -> list[bytes]:
    return [f"m-{i:03d}".encode() for i in range(first, first + n)]


async def fill(address: str) -> None:
    async with Client(address, username="iggy", password="iggy") as client:
        await client.create_stream("s")
        await client.create_topic("s", "t", 1)
        for first in (0, 5, 10):  # segments of 10 messages: [0..9] sealed, [10..14] open
            await client.send_messages("s", "t", payloads(first, 5), partitioning=0)
        await client.store_consumer_offset(1, "s", "t", 14, 0)


def plant_damage(partition) -> None:
    sealed, open_log = segments(partition)
    for log, keep in ((open_log, 0), (sealed, 5)):
        with open(log, "r+b") as f:
            f.truncate(keep * MESSAGE_BYTES)
        with open(log.with_suffix(".index"), "r+b") as f:
            f.truncate(keep * 16)
    for stem in ("0000000000000000000\u00b2", "99999999999999999999"):
        shutil.copy(sealed, partition / f"{stem}.log")


async def test_restart_over_damaged_files_keeps_consumers_going(server_factory) -> None:
    server = server_factory({"LURCHER_SYSTEM_SEGMENT_SIZE": f"{10 * MESSAGE_BYTES} B"})
    await fill(server.tcp_address)
    server.stop()
    plant_damage(partition_dirs(server.data_dir)[0])
    server.restart()
    async with Client(server.tcp_address, username="iggy", password="iggy") as client:
        info = await client.get_consumer_offset(1, "s", "t", 0)
        assert (info.current_offset, info.stored_offset) == (9, 9)
        await client.send_messages("s", "t", payloads(100, 3), partitioning=0)
        polled = await client.poll_messages("s", "t", 0, "next", 10, consumer=1)
        assert [(m.offset, m.payload) for m in polled.messages()] == [
            (10, b"m-100"), (11, b"m-101"), (12, b"m-102")]
        from_gap = await client.poll_messages("s", "t", 0, 6, 2)
        assert [m.offset for m in from_gap.messages()] == [10, 11]
        everything = await client.poll_messages("s", "t", 0, "first", 100)
        assert [m.payload for m in everything.messages()] == payloads(0, 5) + payloads(100, 3)
    log = server.log_tail()
    assert "offsets 5 to 9 are not stored" in log and CUT_WARNING in log
    assert "Traceback" not in log


def test_a_renamed_segment_stops_the_start_with_one_line_and_is_kept(server_factory) -> None:
    server = server_factory({"LURCHER_SYSTEM_SEGMENT_SIZE": f"{10 * MESSAGE_BYTES} B"})
    asyncio.run(fill(server.tcp_address))
    server.stop()
    sealed, open_log = segments(partition_dirs(server.data_dir)[0])
    renamed = open_log.with_name(f"{11:020d}.log")
    open_log.rename(renamed)
    kept = renamed.read_bytes()
    done = run_server_to_exit(["--with-default-root-credentials"],
                              {**server.env, "LURCHER_TCP_ADDRESS": "127.0.0.1:0"},
                              cwd=server.data_dir)
    assert done.returncode == 1
    assert f"cannot start: {renamed} begins with message 10, not 11" in done.stderr + done.stdout
    assert "Traceback" not in done.stderr + done.stdout
    assert renamed.read_bytes() == kept


async def stopped_with_one_topic(server_factory, partitions: int):
    """A server stopped after storing 5 messages in partition 0 of topic s/t."""
    server = server_factory()
    async with Client(server.tcp_address, username="iggy", password="iggy") as client:
        await client.create_stream("s")
        await client.create_topic("s", "t", partitions)
        await client.send_messages("s", "t", payloads(0, 5), partitioning=0)
    server.stop()
    return server


def damage_last_metadata_record(data_dir) -> None:
    log = data_dir / "state" / "log"
    data = bytearray(log.read_bytes())
    data[-1] ^= 1  # the last byte of the last record's body: its checksum fails
    log.write_bytes(bytes(data))


async def test_a_topic_the_damaged_metadata_lost_keeps_its_messages_aside(server_factory):
    """The start cut the damaged last record (TopicCreated) as a torn tail and then deleted
    the topic's directory, its acknowledged messages with it, as an orphan."""
    server = await stopped_with_one_topic(server_factory, partitions=1)
    [partition] = partition_dirs(server.data_dir)
    stored = {p.name: p.read_bytes() for p in segments(partition)}
    damage_last_metadata_record(server.data_dir)
    server.restart()
    log = server.log_tail(20_000)
    assert "dropping" in log and "moved orphan directory" in log and "Traceback" not in log
    [kept] = partition_dirs(server.data_dir)
    assert kept.is_relative_to(server.data_dir / "orphans")
    assert {p.name: p.read_bytes() for p in segments(kept)} == stored


def test_an_empty_jwt_secret_is_replaced_and_a_damaged_one_stops_the_start(server_factory):
    """An empty state/jwt_secret made every HTTP login fail (500, a traceback each); a
    secret that is not UTF-8 stopped the start with a traceback."""
    http = {"LURCHER_HTTP_ENABLED": "true", "LURCHER_HTTP_ADDRESS": "127.0.0.1:0"}
    server = server_factory(http)
    server.stop()
    secret = server.data_dir / "state" / "jwt_secret"
    secret.write_bytes(b"")
    server.restart()
    login = httpx.post(f"http://{server.endpoints['http']}/users/login",
                       json={"username": "iggy", "password": "iggy"})
    assert login.status_code == 200 and login.json()["access_token"]["token"]
    assert "is empty" in server.log_tail() and "Traceback" not in server.log_tail()
    server.stop()
    secret.write_bytes(b"\xff" * 43)
    done = run_server_to_exit(["--with-default-root-credentials"],
                              {**server.env, **http}, cwd=server.data_dir)
    output = done.stderr + done.stdout
    assert done.returncode == 1 and "Traceback" not in output
    assert f"cannot start: {secret} is damaged (43 bytes" in output


async def test_a_missing_partition_directory_is_logged(server_factory):
    """streams/ moved away (or its volume not mounted): the server started with every
    partition empty and said nothing."""
    server = await stopped_with_one_topic(server_factory, partitions=2)
    shutil.move(server.data_dir / "streams", server.data_dir / "streams.elsewhere")
    server.restart()
    log = server.log_tail(20_000)
    for pid in (0, 1):
        path = server.data_dir / "streams" / "0" / "topics" / "0" / "partitions" / str(pid)
        assert log.count(f"partition directory {path} is missing: it starts empty") == 1
    assert "Traceback" not in log


async def test_offsets_are_stored_on_a_partition_whose_messages_were_all_deleted(
        server_factory) -> None:
    """The open segment cut to nothing (a crash after its rotation), then the sealed one
    deleted: no message left, the last offset 9. Iggy 0.8 refuses a stored offset only on
    a partition at offset 0 with no message (validate_partition_offset): up to 9 is taken,
    for a consumer and a group member, and 10 is refused (the old code refused them all)."""
    server = server_factory({"LURCHER_SYSTEM_SEGMENT_SIZE": f"{10 * MESSAGE_BYTES} B"})
    async with Client(server.tcp_address, username="iggy", password="iggy") as client:
        await client.create_stream("s")
        await client.create_topic("s", "t", 1)
        for first in (0, 5, 10):  # [0..9] sealed, [10..14] open
            await client.send_messages("s", "t", payloads(first, 5), partitioning=0)
    server.stop()
    open_log = segments(partition_dirs(server.data_dir)[0])[-1]
    for path in (open_log, open_log.with_suffix(".index")):
        with open(path, "r+b") as f:
            f.truncate(0)
    server.restart()
    async with Client(server.tcp_address, username="iggy", password="iggy") as client:
        await client.delete_segments("s", "t", 0, 1)
        partition = (await client.get_topic("s", "t")).partitions[0]
        assert (partition.messages_count, partition.current_offset) == (0, 9)
        await client.store_consumer_offset(1, "s", "t", 9, 0)
        await client.create_consumer_group("s", "t", "g")
        await client.join_consumer_group("s", "t", "g")
        await client.store_consumer_offset("g", "s", "t", 4, 0, group=True)
        with pytest.raises(IggyError) as refused:
            await client.store_consumer_offset(1, "s", "t", 10, 0)
        assert refused.value.code == ErrorCode.INVALID_OFFSET
        assert (await client.get_consumer_offset(1, "s", "t", 0)).stored_offset == 9
        assert (await client.get_consumer_offset("g", "s", "t", 0, group=True)).stored_offset == 4
        await client.send_messages("s", "t", payloads(100, 2), partitioning=0)
        polled = await client.poll_messages("s", "t", 0, "next", 10, consumer=1)
        assert [(m.offset, m.payload) for m in polled.messages()] == [
            (10, b"m-100"), (11, b"m-101")]


async def test_a_file_at_a_partition_directory_refuses_the_start_without_calling_it_missing(
        server_factory):
    """The old code first logged "partition directory ... is missing: it starts empty",
    untrue, and then refused the start (the directory cannot be made)."""
    server = await stopped_with_one_topic(server_factory, partitions=1)
    [partition] = partition_dirs(server.data_dir)
    shutil.rmtree(partition)
    partition.write_bytes(b"in the way")
    done = run_server_to_exit(["--with-default-root-credentials"], server.env,
                              cwd=server.data_dir)
    output = done.stderr + done.stdout
    assert done.returncode == 1 and "Traceback" not in output
    assert "is missing" not in output
    assert f"cannot start: [Errno 17] File exists: '{partition}'" in output
