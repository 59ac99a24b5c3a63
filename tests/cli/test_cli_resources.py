"""Resource commands of the real ``lurcher`` command against a real server: streams,
topics (partitions, compression, expiry, max size), partitions, segments, consumer groups,
consumer offsets, users, permissions, personal access tokens, clients, ping/me/stats; with
text tables and ``--json`` output."""

from __future__ import annotations

import json
from pathlib import Path

from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.consumer_groups.get_consumer_group import GetConsumerGroup
from lurcher.core.wire.requests.consumer_groups.join_consumer_group import JoinConsumerGroup
from lurcher.core.wire.responses.consumer_groups import GroupDetails
from lurcher.sdk.cli.exitcodes import ExitCode
from tests.cli.conftest import Cli
from tests.support import raw

U64_MAX = (1 << 64) - 1


def test_ping_me_stats(lurcher: Cli) -> None:
    assert len(lurcher("ping", "--count", "3", check=0).lines()) == 3
    assert lurcher("--json", "ping", check=0).json()["times_ms"][0] >= 0
    me = lurcher("me", check=0).out
    assert "client id" in me and "transport        tcp" in me
    stats = lurcher("--json", "stats", check=0).json()
    assert stats["iggy_server_version"] and "streams_count" in stats
    assert "server version" in lurcher("stats", check=0).out


def test_streams(lurcher: Cli) -> None:
    assert "created with id" in lurcher("stream", "create", "alpha", check=0).out
    lurcher("stream", "create", "beta", check=0)
    table = lurcher("stream", "list", check=0).lines()
    assert table[0].split() == ["ID", "NAME", "CREATED", "SIZE", "MESSAGES", "TOPICS"]
    assert [line.split()[1] for line in table[1:]] == ["alpha", "beta"]
    lurcher("stream", "update", "beta", "gamma", check=0)
    assert [s["name"] for s in lurcher("stream", "list", "--json", check=0).json()] == [
        "alpha", "gamma"]
    lurcher("topic", "create", "alpha", "t", check=0)
    lurcher("message", "send", "alpha", "t", "x", check=0)
    details = lurcher("--json", "stream", "get", "alpha", check=0).json()
    assert details["header"]["messages_count"] == 1 and details["topics"][0]["name"] == "t"
    assert "NAME      alpha" in lurcher("stream", "get", "alpha", check=0).out
    lurcher("stream", "purge", "alpha", check=0)
    assert lurcher("--json", "stream", "get", "alpha", check=0).json()["header"][
        "messages_count"] == 0
    assert lurcher("-q", "stream", "delete", "gamma", check=0).out == ""
    assert lurcher("stream", "get", "gamma").code == ExitCode.NOT_FOUND


def test_topics_partitions_segments(lurcher: Cli) -> None:
    lurcher("stream", "create", "s", check=0)
    lurcher("topic", "create", "s", "a", "3", "gzip", "1day", "2h", "--max-topic-size", "5GB",
            check=0)
    lurcher("topic", "create", "s", "b", "--partitions", "2", "--expiry", "unlimited",
            "-m", "unlimited", check=0)
    a = lurcher("--json", "topic", "get", "s", "a", check=0).json()
    assert a["header"]["partitions_count"] == 3 and len(a["partitions"]) == 3
    assert a["header"]["compression"] == 2
    assert a["header"]["message_expiry_us"] == (86_400 + 7_200) * 1_000_000
    assert a["header"]["max_topic_size_bytes"] == 5 * 10**9
    b = lurcher("--json", "topic", "get", "s", "b", check=0).json()["header"]
    assert (b["message_expiry_us"], b["max_topic_size_bytes"]) == (U64_MAX, U64_MAX)
    table = lurcher("topic", "list", "s", check=0).lines()
    assert table[0].split()[:4] == ["ID", "NAME", "CREATED", "PARTITIONS"]
    assert "1d 2h" in table[1] and "gzip" in table[1] and "unlimited" in table[2]
    assert "CURRENT OFFSET" in lurcher("topic", "get", "s", "a", check=0).out
    lurcher("topic", "update", "s", "a", "a2", "none", "15days", check=0)
    a2 = lurcher("--json", "topic", "get", "s", "a2", check=0).json()["header"]
    assert a2["compression"] == 1 and a2["message_expiry_us"] == 15 * 86_400 * 1_000_000
    lurcher("partition", "create", "s", "a2", "2", check=0)
    assert lurcher("--json", "topic", "get", "s", "a2", check=0).json()["header"][
        "partitions_count"] == 5
    lurcher("partition", "delete", "s", "a2", "4", check=0)
    assert lurcher("--json", "topic", "get", "s", "a2", check=0).json()["header"][
        "partitions_count"] == 1
    lurcher("message", "send", "s", "a2", "-p", "0", "m", check=0)
    # The only segment is the open one, which is never deleted: the command succeeds and
    # the message stays.
    lurcher("segment", "delete", "s", "a2", "0", "1", check=0)
    partition = lurcher("--json", "topic", "get", "s", "a2", check=0).json()["partitions"][0]
    assert (partition["segments_count"], partition["messages_count"]) == (1, 1)
    lurcher("topic", "purge", "s", "a2", check=0)
    lurcher("topic", "delete", "s", "b", check=0)
    assert [t["name"] for t in lurcher("--json", "topic", "list", "s", check=0).json()] == ["a2"]


def _join(server, group: str) -> raw.RawClient:
    member = raw.RawClient(server.tcp_address)
    member.login()
    request = JoinConsumerGroup(Identifier.parse("s"), Identifier.parse("t"),
                                Identifier.parse(group))
    member.call(JoinConsumerGroup.CODE, request.encode())
    return member


def _assignment(client: raw.RawClient, group: str) -> list[tuple[int, list[int]]]:
    request = GetConsumerGroup(Identifier.parse("s"), Identifier.parse("t"),
                               Identifier.parse(group))
    details = GroupDetails.decode_exact(client.call(GetConsumerGroup.CODE, request.encode()))
    return [(m.id, sorted(m.partitions)) for m in details.members]


def test_group_offsets_leave_a_running_group_alone(lurcher: Cli, server) -> None:
    """get reads without joining; set and delete refuse a group with members (joining and
    leaving moved partitions between them, and the command's member owned none)."""
    lurcher("stream", "create", "s", check=0)
    lurcher("topic", "create", "s", "t", "3", check=0)
    lurcher("consumer-group", "create", "s", "t", "busy", check=0)
    lurcher("message", "send", "s", "t", "-p", "1", "a", "b", "c", check=0)
    lurcher("consumer-offset", "set", "busy", "s", "t", "1", "1", "-k", "consumer-group",
            check=0)                                     # no members yet: it joins for it
    first, second = _join(server, "busy"), _join(server, "busy")
    before = _assignment(first, "busy")
    assert before == [(0, [0, 1]), (1, [2])]
    got = lurcher("--json", "consumer-offset", "get", "busy", "s", "t", "1", "-k",
                  "consumer-group", check=0).json()
    assert got["stored_offset"] == 1
    for action in (("set", "busy", "s", "t", "1", "2"), ("delete", "busy", "s", "t", "1")):
        refused = lurcher("consumer-offset", *action, "-k", "consumer-group")
        assert refused.code == ExitCode.ERROR
        assert refused.err.strip() == ("error: consumer group 'busy' has 2 member(s): only "
                                       "the one owning partition 1 may change its offset; "
                                       "stop them and run this again")
    assert _assignment(first, "busy") == before
    assert lurcher("--json", "consumer-offset", "get", "busy", "s", "t", "1", "-k",
                   "consumer-group", check=0).json()["stored_offset"] == 1
    first.close()
    second.close()


def test_consumer_groups_and_offsets(lurcher: Cli) -> None:
    lurcher("stream", "create", "s", check=0)
    lurcher("topic", "create", "s", "t", "2", check=0)
    lurcher("consumer-group", "create", "s", "t", "g1", check=0)
    table = lurcher("consumer-group", "list", "s", "t", check=0).lines()
    assert table[0].split() == ["ID", "NAME", "PARTITIONS", "MEMBERS"]
    assert table[1].split()[1:] == ["g1", "2", "0"]
    assert lurcher("--json", "consumer-group", "get", "s", "t", "g1", check=0).json()[
        "header"]["name"] == "g1"
    lurcher("message", "send", "s", "t", "-p", "1", "a", "b", "c", check=0)
    lurcher("consumer-offset", "set", "reader", "s", "t", "1", "1", check=0)
    got = lurcher("--json", "consumer-offset", "get", "reader", "s", "t", "1", check=0).json()
    assert (got["stored_offset"], got["current_offset"]) == (1, 2)
    assert "stored offset   1" in lurcher("consumer-offset", "get", "reader", "s", "t", "1",
                                          check=0).out
    polled = lurcher("message", "poll", "s", "t", "1", "--consumer", "reader", "--format",
                     "payload", check=0)
    assert polled.out == "c\n"
    lurcher("consumer-offset", "set", "g1", "s", "t", "1", "0", "--kind", "consumer-group",
            check=0)
    assert lurcher("--json", "consumer-offset", "get", "g1", "s", "t", "1", "-k",
                   "consumer-group", check=0).json()["stored_offset"] == 0
    lurcher("consumer-offset", "delete", "reader", "s", "t", "1", check=0)
    assert lurcher("consumer-offset", "get", "reader", "s", "t", "1").code == ExitCode.NOT_FOUND
    lurcher("consumer-group", "delete", "s", "t", "g1", check=0)
    assert lurcher("--json", "consumer-group", "list", "s", "t", check=0).json() == []


def test_users_permissions_and_tokens(lurcher: Cli, cli: Cli, server, tmp_path: Path) -> None:
    lurcher("stream", "create", "s", check=0)
    lurcher("topic", "create", "s", "t", check=0)
    lurcher("user", "create", "alice", "secret1", "-g", "r_str,read_topics",
            "-s", "0:p_msg#0:s_msg", check=0)
    table = lurcher("user", "list", check=0).lines()
    assert table[0].split() == ["ID", "USERNAME", "STATUS", "CREATED"]
    assert [line.split()[1] for line in table[1:]] == ["iggy", "alice"]
    perms = lurcher("--json", "permissions", "get", "alice", check=0).json()
    assert perms["global"]["read_streams"] and perms["global"]["read_topics"]
    assert not perms["global"]["manage_streams"]
    assert perms["streams"]["0"]["poll_messages"]
    assert perms["streams"]["0"]["topics"]["0"]["send_messages"]
    assert "read_streams,read_topics" in lurcher("user", "get", "alice", check=0).out
    perms["global"]["manage_streams"] = True
    file = tmp_path / "perms.json"
    file.write_text(json.dumps(perms))
    lurcher("permissions", "set", "alice", "--file", str(file), check=0)
    alice = f"iggy://alice:secret1@{server.tcp_address}"
    cli("--connection", alice, "stream", "create", "by-alice", check=0)
    lurcher("permissions", "set", "alice", "--clear", check=0)
    assert lurcher("--json", "permissions", "get", "alice", check=0).json() is None
    assert cli("--connection", alice, "stream", "list").code == ExitCode.PERMISSION
    lurcher("user", "permissions", "alice", "-g", "r_str", check=0)
    cli("--connection", alice, "stream", "list", check=0)
    lurcher("user", "password", "alice", "secret1", "secret2", check=0)
    assert cli("--connection", alice, "stream", "list").code == ExitCode.CREDENTIALS
    lurcher("user", "update", "alice", "alicia", check=0)
    lurcher("user", "update", "alicia", "--status", "inactive", check=0)
    got = lurcher("--json", "user", "get", "alicia", check=0).json()["header"]
    assert (got["username"], got["status"]) == ("alicia", 2)
    lurcher("user", "delete", "alicia", check=0)
    assert lurcher("user", "get", "alicia").code == ExitCode.NOT_FOUND
    token = lurcher("-q", "pat", "create", "ci-token", "1day", check=0).out.strip()
    cli("--address", server.tcp_address, "--token", token, "stream", "list", check=0)
    pats = lurcher("--json", "pat", "list", check=0).json()
    assert [p["name"] for p in pats] == ["ci-token"] and pats[0]["expiry_at"] > 0
    assert lurcher("pat", "list", check=0).lines()[0].split() == ["NAME", "EXPIRES"]
    lurcher("pat", "delete", "ci-token", check=0)
    assert cli("--address", server.tcp_address, "--token", token, "stream", "list").code == (
        ExitCode.CREDENTIALS)


def test_names_with_control_characters_are_shown_escaped(lurcher: Cli) -> None:
    """A stream named with a newline and a terminal escape (the server takes any UTF-8
    name) was printed as is: the table row broken in two and the escape sent to the
    terminal, in list, get, the create note and the error line."""
    name = "evil\x1b[31m\nline"
    shown = "evil\\x1b[31m\\nline"
    assert lurcher("stream", "create", name, check=0).lines() == [
        f"stream '{shown}' created with id 0"]
    table = lurcher("stream", "list", check=0).lines()
    assert len(table) == 2 and table[1].split()[1] == shown
    assert f"NAME      {shown}" in lurcher("stream", "get", name, check=0).lines()
    again = lurcher("stream", "create", name)
    assert again.code == ExitCode.ALREADY_EXISTS and again.err.splitlines() == [
        f"error: stream '{shown}' already exists (StreamNameAlreadyExists, 1012)"]
    assert lurcher("--json", "stream", "list", check=0).json()[0]["name"] == name


def test_a_token_expiring_after_year_9999_is_listed(lurcher: Cli) -> None:
    """A token created with a long expiry (9999999days) made every 'pat list', --json
    included, fail with 'invalid argument: year 29405 is out of range'."""
    lurcher("pat", "create", "far", "9999999days", check=0)
    assert lurcher("pat", "list", check=0).lines()[1].split() == ["far", "after",
                                                                  "9999-12-31"]
    [far] = lurcher("--json", "pat", "list", check=0).json()
    assert far["name"] == "far" and far["expiry_at"] > 253402300800 * 1_000_000


def test_clients(lurcher: Cli) -> None:
    me = lurcher("--json", "me", check=0).json()["header"]
    rows = lurcher("--json", "client", "list", check=0).json()
    assert rows and all(r["transport"] == 1 for r in rows)
    table = lurcher("client", "list", check=0).lines()
    assert table[0].split() == ["ID", "USER", "ID", "TRANSPORT", "ADDRESS", "GROUPS"]
    assert me["client_id"] not in [r["client_id"] for r in rows]  # that connection is gone
    one = lurcher("--json", "client", "get", str(rows[0]["client_id"]))
    assert one.code in (ExitCode.OK, ExitCode.NOT_FOUND)
    assert lurcher("client", "get", "999999").code == ExitCode.NOT_FOUND
