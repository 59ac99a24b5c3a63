"""CLI commands for operators: snapshot (the server builds the ZIP), cluster metadata, message flush, poll to a file,
shell completion, ``--group`` creating its group; one-line connection failures (QUIC
included, without asyncio noise); bench's one-line failures and its --help."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.support.server import REPO_ROOT


def test_snapshot_writes_a_zip_with_the_requested_parts_and_no_secret(cli, server_factory,
                                                                      tmp_path: Path):
    secret = "jwt-Secret-not-for-snapshots"
    srv = server_factory({"LURCHER_HTTP_JWT_ENCODING_SECRET": secret})
    target = tmp_path / "snap.zip"
    result = cli("--connection", f"iggy://iggy:iggy@{srv.tcp_address}", "snapshot",
                 "--output-file", str(target), "--type", "server_config", "--type",
                 "filesystem_overview", check=0)
    assert str(target) in result.out
    with zipfile.ZipFile(target) as archive:
        assert sorted(archive.namelist()) == ["filesystem_overview.txt", "server_config.json"]
        config = json.loads(archive.read("server_config.json"))
        assert config["http"]["jwt"]["encoding_secret"] == "<redacted>"
        assert secret.encode() not in archive.read("server_config.json")
        assert b"lurcher.lock" in archive.read("filesystem_overview.txt")


def test_snapshot_all_has_every_part(lurcher, tmp_path: Path):
    target = tmp_path / "all.zip"
    lurcher("snapshot", "--output-file", str(target), "--compression", "stored", check=0)
    with zipfile.ZipFile(target) as archive:
        names = archive.namelist()
    for part in ("filesystem_overview.txt", "process_list.txt", "resource_usage.txt",
                 "test.txt", "server_config.json"):
        assert part in names
    assert any(n.startswith("server_logs/") for n in names)


def test_snapshot_to_a_path_that_cannot_be_written_is_a_one_line_error(lurcher,
                                                                       tmp_path: Path):
    """It was a traceback (FileNotFoundError / IsADirectoryError), exit 1."""
    reasons = {tmp_path / "missing" / "snap.zip": "No such file or directory",
               tmp_path: "Is a directory"}
    for target, reason in reasons.items():
        result = lurcher("snapshot", "--output-file", str(target), "--type", "test")
        assert result.code == 2 and result.out == ""
        assert result.err == f"error: cannot write {target}: {reason}\n"


def test_cluster_metadata_lists_this_node(lurcher, server):
    result = lurcher("--json", "cluster", "metadata", check=0)
    meta = json.loads(result.out)
    assert len(meta["nodes"]) == 1
    assert meta["nodes"][0]["tcp_port"] == server.tcp_port


def test_cluster_status_without_the_http_api_is_a_one_line_error(lurcher):
    """The status is served by the node's HTTP API (off in the test server)."""
    result = lurcher("cluster", "status")
    assert result.code != 0 and result.out == ""
    assert len(result.err.strip().splitlines()) == 1 and "HTTP API" in result.err


def test_message_flush_with_fsync(lurcher):
    lurcher("stream", "create", "s", check=0)
    lurcher("topic", "create", "s", "t", "1", check=0)
    lurcher("message", "send", "s", "t", "--partition-id", "0", "a", check=0)
    assert "flushed partition 0 of s/t (fsync)" in lurcher(
        "message", "flush", "s", "t", "0", "--fsync", check=0).out


def test_poll_output_file_gets_the_messages_not_stdout(lurcher, tmp_path: Path):
    lurcher("stream", "create", "s", check=0)
    lurcher("topic", "create", "s", "t", "1", check=0)
    lurcher("message", "send", "s", "t", "one", "two", check=0)
    target = tmp_path / "out.jsonl"
    result = lurcher("message", "poll", "s", "t", "0", "--first", "--count", "10", "--format", "json",
                     "--output-file", str(target), check=0)
    assert result.out == ""
    payloads = [json.loads(line)["payload"] for line in target.read_text().splitlines()]
    assert payloads == ["one", "two"]


def test_poll_with_a_new_group_name_creates_the_group(lurcher):
    lurcher("stream", "create", "s", check=0)
    lurcher("topic", "create", "s", "t", "1", check=0)
    lurcher("message", "send", "s", "t", "x", check=0)
    assert "x" in lurcher("message", "poll", "s", "t", "--group", "fresh", check=0).out
    assert "fresh" in lurcher("consumer-group", "list", "s", "t", check=0).out


def test_bash_completion_completes_commands_actions_and_flags(cli):
    script = cli("completion", "bash", check=0).out

    def complete(*words: str) -> list[str]:
        line = " ".join(words)
        probe = (f"{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _lurcher; "
                 'echo "${COMPREPLY[@]}"')
        return subprocess.run(["bash", "-c", probe], capture_output=True, text=True,
                              check=True).stdout.split()

    assert {"stream", "stats", "snapshot"} <= set(complete("lurcher", "s"))
    assert "flush" in complete("lurcher", "message", "f")
    assert "--output-file" in complete("lurcher", "message", "poll", "--o")


def test_unreachable_server_over_quic_is_one_line_and_quick(cli):
    result = cli("--connection", "iggy+quic://iggy:iggy@127.0.0.1:1", "stream", "list")
    assert result.code != 0
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and "cannot connect to 127.0.0.1:1" in lines[0], result.err
    assert "Future exception" not in result.err and "Traceback" not in result.err


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "lurcher.bench", *args], capture_output=True,
                          text=True, env=env, timeout=60)


def test_bench_help_shows_compare_and_list():
    out = bench("--help").stdout
    assert "lurcher-bench compare WORKLOAD" in out and "lurcher-bench list" in out


def test_bench_against_unreachable_or_wrong_password_is_one_line(server, tmp_path: Path):
    for args in (["--server-address", "127.0.0.1:1"],
                 ["--server-address", server.tcp_address, "--password", "wrong"]):
        result = bench("pinned-producer", "--message-batches", "1", "--output-dir",
                       str(tmp_path), "--no-progress", *args)
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("lurcher-bench: "), result.stderr
