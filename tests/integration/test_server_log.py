"""What a real server logs for operators (read from its log file, JSON lines, and its output):
connections, logins and failed logins, metadata changes with their actor, segment rotation
and deletion, limits hit, the kept root user; and never a secret."""

from __future__ import annotations

import json

import pytest

from lurcher.core.wire.errors import IggyError
from lurcher.sdk.sync import SyncClient

PASSWORD = "S3cret-Alice-pw"
NEW_ROOT_PASSWORD = "N3w-R00t-pw"
ENV = {
    "LURCHER_SYSTEM_LOGGING_FORMAT": "json",
    "LURCHER_SYSTEM_LOGGING_FILE": "logs/server.log",
    "LURCHER_SYSTEM_SEGMENT_SIZE": "4096",
    "LURCHER_PERSONAL_ACCESS_TOKEN_MAX_TOKENS_PER_USER": "1",
}


def records(server) -> list[dict]:
    path = server.data_dir / "logs" / "server.log"
    return [json.loads(line) for line in path.read_text().splitlines()]


def messages(server) -> str:
    return "\n".join(r["message"] for r in records(server))


@pytest.fixture
def logged_server(server_factory):
    srv = server_factory(ENV)
    url = f"iggy://iggy:iggy@{srv.tcp_address}"
    with SyncClient.from_connection_string(url) as root:
        root.create_user("alice", PASSWORD)
        root.create_stream("orders")
        root.create_topic("orders", "created", partitions_count=1)
        for _ in range(8):
            root.send_messages("orders", "created", [b"x" * 900] * 2, 0)
        root.delete_segments("orders", "created", 0, 1)
        token = root.create_personal_access_token("ci-token")
        with pytest.raises(IggyError):
            root.create_personal_access_token("second")
        root.delete_stream("orders")
    with pytest.raises(IggyError):
        SyncClient.from_connection_string(f"iggy://alice:wrong-password@{srv.tcp_address}")
    srv.stop()
    return srv, token


def test_log_file_is_json_lines_with_level_logger_and_time(logged_server):
    srv, _ = logged_server
    first = records(srv)[0]
    assert {"time", "level", "logger", "message", "pid"} <= set(first)
    assert first["time"].endswith("Z")


def test_connections_logins_and_failed_logins_are_logged(logged_server):
    srv, _ = logged_server
    text = messages(srv)
    assert "over tcp) connected" in text
    assert "over tcp) logged in as 'iggy'" in text
    assert "disconnected (user 'iggy')" in text
    failed = [r for r in records(srv) if "failed login as 'alice'" in r["message"]]
    assert failed and failed[0]["level"] == "WARNING" and "over tcp" in failed[0]["message"]


def test_metadata_changes_name_what_and_who(logged_server):
    srv, _ = logged_server
    text = messages(srv)
    assert "user 'iggy' (id 0) created by the server" in text
    assert "user 'alice' (id 1) created by 'iggy', client" in text
    assert "stream 'orders' (id 0) created by 'iggy'" in text
    assert "topic 'created' (id 0) with 1 partition(s) created in stream 'orders' (id 0) by 'iggy'" in text
    assert "personal access token 'ci-token' of user 'iggy' (id 0) created by 'iggy'" in text
    assert "stream 'orders' (id 0) deleted by 'iggy'" in text


def test_segment_rotation_deletion_and_limits_are_logged(logged_server):
    srv, _ = logged_server
    text = messages(srv)
    assert "segment rotation in" in text and "new segment from offset" in text
    assert "deleted 1 segment(s)" in text
    assert "limit hit: create_personal_access_token refused" in text


def test_no_secret_is_logged(logged_server):
    srv, token = logged_server
    everything = (srv.data_dir / "logs" / "server.log").read_text() + srv.output_path.read_text()
    for secret in (PASSWORD, "wrong-password", token):
        assert secret not in everything


def test_second_start_with_new_root_credentials_warns_that_the_stored_root_is_kept(
        server_factory):
    srv = server_factory(ENV)
    srv.stop()
    srv.env.update({"LURCHER_ROOT_USERNAME": "admin", "LURCHER_ROOT_PASSWORD": NEW_ROOT_PASSWORD})
    srv.restart()
    srv.stop()
    warnings = [r["message"] for r in records(srv) if r["level"] == "WARNING"]
    assert any("stored root user 'iggy' is kept: LURCHER_ROOT_USERNAME and "
               "LURCHER_ROOT_PASSWORD ignored" in w for w in warnings), warnings
    assert NEW_ROOT_PASSWORD not in srv.output_path.read_text()
