"""Operating a real server: one server per data directory, an absolute data path in the log,
runtime files only while running, and one-line refusals of bad configuration (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lurcher.sdk.sync import SyncClient
from tests.support.server import LurcherServer, run_server_to_exit


def connect(server: LurcherServer) -> SyncClient:
    return SyncClient.from_connection_string(f"iggy://iggy:iggy@{server.tcp_address}")


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


def test_second_server_on_the_same_data_dir_is_refused_and_the_first_is_untouched(server):
    with connect(server) as client:
        client.create_stream("kept")
    refused = run_server_to_exit([], {"LURCHER_SYSTEM_PATH": str(server.data_dir)},
                                 cwd=server.data_dir)
    assert refused.returncode == 1
    line = one_line(refused.stderr)
    assert f"pid {server.pid}" in line and "in use" in line and str(server.data_dir) in line
    with connect(server) as client:
        assert [s.name for s in client.get_streams()] == ["kept"]
    server.restart()
    with connect(server) as client:
        assert [s.name for s in client.get_streams()] == ["kept"]


def test_relative_data_path_is_logged_absolute_and_runtime_files_go_on_clean_stop(
        server_factory, tmp_path: Path):
    data = tmp_path / "relative-data"
    srv = server_factory({"LURCHER_SYSTEM_PATH": "."}, data_dir=data)
    runtime = data / "runtime"
    assert {p.name for p in runtime.iterdir()} == {"endpoints.json", "shard-0.pid"}
    srv.stop()
    assert f"data directory {data.resolve()}" in srv.output_path.read_text()
    assert list(runtime.iterdir()) == []


def test_clean_stop_of_a_sharded_server_removes_runtime_files(server_factory, tmp_path: Path):
    srv = server_factory({"LURCHER_SYSTEM_SHARDING_SHARDS": "2"})
    runtime = srv.data_dir / "runtime"
    assert {p.name for p in runtime.iterdir()} == {"endpoints.json", "shard-0.pid",
                                                   "shard-1.pid"}
    srv.stop()
    assert list(runtime.iterdir()) == []


@pytest.mark.parametrize("shards", [1, 2])
def test_a_sigterm_the_moment_the_server_is_ready_stops_it_cleanly(server_factory,
                                                                  shards: int):
    """The signal handlers are in place before endpoints.json says the server is ready: a
    SIGTERM sent as soon as it appears (``stop`` requires exit status 0) never meets the
    default action. Several rounds, since the window it guards was short."""
    for _ in range(4):
        srv = server_factory({"LURCHER_SYSTEM_SHARDING_SHARDS": str(shards)})
        srv.stop()


CLUSTER = ('[cluster]\nenabled = true\nsecret = "s"\n{}\n'
           '[cluster.node.current]\nname = "a"\nip = "127.0.0.1"\nreplication_port = 0\n')
"""A one-node cluster's section with one more key; port 0 is refused after the others."""
BAD_FILES = [
    ('[tcp]\nadress = "127.0.0.1:0"\n', "unknown key tcp.adress in {file}; did you mean tcp.address?"),
    ('[tcpp]\nenabled = true\n', "unknown key tcpp in {file}; did you mean tcp?"),
    ('[system.segment]\nsize = "huge"\n',
     "system.segment.size = 'huge' in {file}: expected a size such as 1048576"),
    ("[tcp]\naddress = 8090\n",
     'tcp.address = 8090 in {file}: expected an address "host:port"'),
    ('[system]\nio = "fast"\n', "system.io = 'fast' in {file}: expected one of auto, uring, posix"),
    ("[tcp]\nenabled = 1\n", "tcp.enabled = 1 in {file}: expected true or false"),
    ('tcp = "on"\n', "tcp = 'on' in {file}: expected a section [tcp]"),
    ('[http.jwt]\nalgorithm = "RS256"\n',
     "http.jwt.algorithm = 'RS256' in {file}: only 'HS256' is supported"),
    # found by an audit: each was a traceback (exit 1), some after the root user was made
    ('[http.metrics]\nendpoint = "metrics"\n',
     "http.metrics.endpoint must be a path starting with '/', not 'metrics'"),
    ('[system.logging]\nfile = "a\\u0000b"\n',
     "system.logging.file must not contain a NUL character"),
    ('[heartbeat]\ninterval = "' + "9" * 400 + 's"\n',
     "heartbeat.interval = '" + "9" * 39 + "... in {file}: expected a duration"),
    # found by an audit: an enabled cluster ran with these, its tick loop dead (a division
    # by zero) or spinning, or every link failing on a traceback
    (CLUSTER.format("retransmit_ticks = 0"), "cluster.retransmit_ticks must be 1..1000000, got 0"),
    (CLUSTER.format("tick_ms = -1"), "cluster.tick_ms must be 1..60000, got -1"),
    (CLUSTER.format('name = "' + "x" * 300 + '"'),
     "cluster.name must be 1..255 bytes of UTF-8, got 300"),
    # found by the docs audit: an integer duration was taken as it was, so -1 µs started
    # (an enabled heartbeat then dropped every client, the message cleaner spun)
    ("[heartbeat]\nenabled = true\ninterval = -1\n",
     "heartbeat.interval = -1 in {file}: expected a duration"),
    ("[data_maintenance.messages]\ncleaner_enabled = true\ninterval = -1\n",
     "data_maintenance.messages.interval = -1 in {file}: expected a duration"),
    ("[limits]\nlogin_timeout = 18446744073709551616\n",
     "limits.login_timeout = 18446744073709551616 in {file}: expected a duration"),
    # found by the docs audit: a NUL in any file name reached the OS calls (a ValueError
    # traceback), as it did in system.logging.file before
    ('[tcp.tls]\nenabled = true\ncert_file = "c\\u0000.pem"\n',
     "tcp.tls.cert_file must not contain a NUL character"),
    ('[unix]\nenabled = true\npath = "u\\u0000.sock"\n',
     "unix.path must not contain a NUL character"),
    ('[quic.certificate]\nkey_file = "k\\u0000.pem"\n',
     "quic.certificate.key_file must not contain a NUL character"),
    # found by the docs audit: started, and every token it issued was refused (401)
    ('[http.jwt]\nencoding_secret = "' + "a" * 40 + '"\ndecoding_secret = "' + "b" * 40 + '"\n',
     "http.jwt.decoding_secret must be empty or the same as encoding_secret"),
    # found by the docs audit: started, and every request with an Origin then failed on an
    # ASGI traceback (connection dropped); credentials went to any site
    ('[http.cors]\nallowed_headers = ["ok", "bad\\r\\nX-Evil: 1"]\n',
     "http.cors.allowed_headers: 'bad\\r\\nX-Evil: 1' is not an HTTP token"),
    ("[http.cors]\nallow_credentials = true\n",
     'http.cors.allow_credentials = true cannot go with allowed_origins "*"'),
]


@pytest.mark.parametrize("text,message", BAD_FILES)
def test_bad_config_file_is_refused_in_one_line(tmp_path: Path, text: str, message: str):
    config = tmp_path / "server.toml"
    config.write_text(text)
    result = run_server_to_exit(["--config", str(config)], {"LURCHER_SYSTEM_PATH": "data"},
                                cwd=tmp_path)
    assert result.returncode == 2
    assert message.format(file=config) in one_line(result.stderr)
    assert not (tmp_path / "data").exists()  # refused before touching the data directory


BAD_ENV = [
    ("LURCHER_TCP_ADRESS", "127.0.0.1:0",
     "LURCHER_TCP_ADRESS names no configuration key; did you mean LURCHER_TCP_ADDRESS?"),
    ("LURCHER_TCP_ADDRESS", "notanaddress",
     "LURCHER_TCP_ADDRESS='notanaddress' (tcp.address): expected an address \"host:port\""),
    ("LURCHER_SYSTEM_SEGMENT_SIZE", "huge",
     "LURCHER_SYSTEM_SEGMENT_SIZE='huge' (system.segment.size): expected a size"),
    ("LURCHER_SYSTEM_SHARDING_SHARDS", "two",
     "LURCHER_SYSTEM_SHARDING_SHARDS='two' (system.sharding.shards): expected an integer"),
    ("LURCHER_HEARTBEAT_INTERVAL", "soon",
     "LURCHER_HEARTBEAT_INTERVAL='soon' (heartbeat.interval): expected a duration"),
    # found by an audit: a traceback, a silently wrapped port, kill loops, a busy loop
    ("LURCHER_HEARTBEAT_INTERVAL", "9" * 400,
     "LURCHER_HEARTBEAT_INTERVAL='" + "9" * 39 + "... (heartbeat.interval): expected a duration"),
    ("LURCHER_TCP_ADDRESS", "127.0.0.1:99999",
     "LURCHER_TCP_ADDRESS='127.0.0.1:99999' (tcp.address): expected an address"),
    ("LURCHER_AUTH_ARGON2_PARALLELISM", "16777216",
     "auth.argon2_parallelism must be at most 16777215"),
    ("LURCHER_AUTH_ARGON2_PARALLELISM", "4096",
     "auth.argon2_memory_cost_kib must be at least 8 x argon2_parallelism (32768)"),
    ("LURCHER_SYSTEM_SHARDING_HEARTBEAT_TIMEOUT", "1",
     "system.sharding.heartbeat_timeout must be longer than heartbeat_interval"),
    ("LURCHER_SYSTEM_SHARDING_HEARTBEAT_INTERVAL", "none",
     "system.sharding.heartbeat_interval must be above 0 and not none"),
    ("LURCHER_SYSTEM_SHARDING_HEARTBEAT_INTERVAL", "0",
     "system.sharding.heartbeat_interval must be above 0 and not none"),
    ("LURCHER_SYSTEM_SEGMENT_SIZE", "0", "system.segment.size: expected `int` >= 1"),
    # found by the docs audit: argon2 refused a cost above u32 with a traceback (exit 1)
    ("LURCHER_AUTH_ARGON2_TIME_COST", "4294967296",
     "auth.argon2_time_cost: expected `int` <= 4294967295"),
    ("LURCHER_AUTH_ARGON2_MEMORY_COST_KIB", "99999999999999999999",
     "auth.argon2_memory_cost_kib: expected `int` <= 4294967295"),
    # found by the docs audit: shard 0 failed on a traceback (its client-id stripe empty),
    # and 65536 shards were started one by one until the machine ran out
    ("LURCHER_SYSTEM_SHARDING_SHARDS", "99999999999999999999",
     "system.sharding.shards: expected `int` <= 1024"),
    ("LURCHER_SYSTEM_SHARDING_SHARDS", "1025", "system.sharding.shards: expected `int` <= 1024"),
    # found by the docs audit: the first rotation looked at 2**64 names, never ready
    ("LURCHER_SYSTEM_LOGGING_BACKUPS", "99999999999999999999",
     "system.logging.backups: expected `int` <= 1000"),
    # found by the docs audit: started, then every CreateTopic taking the server default
    # max size was refused InvalidTopicSize (1019)
    ("LURCHER_SYSTEM_TOPIC_MAX_SIZE", "3 MiB",
     "system.topic.max_size must be at least system.segment.size (1073741824 bytes) or "
     "unlimited, not 3145728"),
    # found by the docs audit: started, and then refused every token (52), where 0 means
    # "no limit" for the other such keys
    ("LURCHER_PERSONAL_ACCESS_TOKEN_MAX_TOKENS_PER_USER", "0",
     "personal_access_token.max_tokens_per_user: expected `int` >= 1"),
    # found by the docs audit: started, and then refused every login (Unauthenticated, 40),
    # every command with a payload or every send (InvalidCommand, 3)
    ("LURCHER_LIMITS_MAX_UNAUTHENTICATED_PAYLOAD_BYTES", "0",
     "limits.max_unauthenticated_payload_bytes: expected `int` >= 1"),
    ("LURCHER_LIMITS_MAX_CONTROL_PAYLOAD_BYTES", "0",
     "limits.max_control_payload_bytes: expected `int` >= 1"),
    ("LURCHER_LIMITS_MAX_SEND_PAYLOAD_BYTES", "0 B",
     "limits.max_send_payload_bytes: expected `int` >= 1"),
    # found by the docs audit: started, and every token it issued was then refused (401)
    ("LURCHER_HTTP_JWT_ISSUER", "me",
     "http.jwt.issuer 'me' must be one of valid_issuers ['iggy.apache.org']"),
    ("LURCHER_HTTP_JWT_AUDIENCE", "them",
     "http.jwt.audience 'them' must be one of valid_audiences ['iggy.apache.org']"),
]


@pytest.mark.parametrize("name,value,message", BAD_ENV)
def test_bad_environment_variable_is_refused_in_one_line(tmp_path: Path, name: str, value: str,
                                                         message: str):
    result = run_server_to_exit([], {"LURCHER_SYSTEM_PATH": "data", name: value}, cwd=tmp_path)
    assert result.returncode == 2
    assert one_line(result.stderr).startswith(f"lurcher-server: configuration error: {message}")


@pytest.mark.parametrize("present", ["lurcher_cert.pem", "lurcher_key.pem"])
def test_a_tls_pair_with_one_file_is_refused_and_that_file_is_kept(tmp_path: Path,
                                                                   present: str):
    """self_signed = true generates a pair only where both files are missing: the old code
    wrote a new pair over the one file there (an operator's certificate whose key was
    misnamed, say) and started (found by the docs audit)."""
    certs = tmp_path / "data" / "certs"
    certs.mkdir(parents=True)
    kept = certs / present
    kept.write_bytes(b"the operator's own file\n")
    result = run_server_to_exit([], {"LURCHER_SYSTEM_PATH": "data",
                                     "LURCHER_TCP_TLS_ENABLED": "true"}, cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "cannot start: TLS" in last and f"missing but {kept} exists" in last, last
    assert kept.read_bytes() == b"the operator's own file\n"
    assert sorted(p.name for p in certs.iterdir()) == [present]


def test_a_duration_key_whose_default_reads_as_a_size_takes_durations(server_factory):
    """auth.login_backoff_reset (default "15 m") was judged a size: "1 h" stopped the start
    with "expected a size" (found by the docs audit)."""
    srv = server_factory({"LURCHER_AUTH_LOGIN_BACKOFF_RESET": "1 h"})
    with connect(srv) as client:
        client.ping()


@pytest.mark.parametrize("endpoint,route", [("/users", "/users"), ("/", "/"),
                                            ("/streams/x", "/streams/{stream_id}")])
def test_a_metrics_endpoint_on_an_api_path_is_refused_in_one_line(tmp_path: Path,
                                                                 endpoint: str, route: str):
    """The metrics route and the API's GET route of one path: the old code started, and
    whichever came first took every request (GET /users answered the metrics, without a
    login; metrics at / were never served) (found by the docs audit)."""
    result = run_server_to_exit([], {"LURCHER_SYSTEM_PATH": "data", "LURCHER_HTTP_ENABLED": "true",
                                     "LURCHER_HTTP_ADDRESS": "127.0.0.1:0",
                                     "LURCHER_HTTP_METRICS_ENDPOINT": endpoint}, cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert (f"cannot start: http.metrics.endpoint {endpoint!r} is also the path of GET "
            f"{route}") in last, last


@pytest.mark.parametrize("username,password,message", [
    ("ab", "secret", "InvalidUsername (43): LURCHER_ROOT_USERNAME: length 2 outside 3..50"),
    ("admin", "xx", "InvalidPassword (44): LURCHER_ROOT_PASSWORD: length 2 outside 3..100"),
    ("admin", "p" * 101,
     "InvalidPassword (44): LURCHER_ROOT_PASSWORD: length 101 outside 3..100"),
])
def test_root_credentials_no_login_accepts_are_refused_and_nothing_is_made(
        server_factory, tmp_path: Path, username: str, password: str, message: str):
    """The old code created the root user with them, and every login was then refused
    (InvalidUsername / InvalidPassword) while later starts keep the stored root user: a
    data directory nobody could log in to (found by the docs audit)."""
    data = tmp_path / "data"
    result = run_server_to_exit([], {"LURCHER_SYSTEM_PATH": str(data),
                                     "LURCHER_ROOT_USERNAME": username,
                                     "LURCHER_ROOT_PASSWORD": password}, cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert f"cannot start: {message}, which no login accepts" in last, last
    srv = server_factory({"LURCHER_ROOT_USERNAME": "admin", "LURCHER_ROOT_PASSWORD": "secret"},
                         data_dir=data)
    with SyncClient.from_connection_string(f"iggy://admin:secret@{srv.tcp_address}") as client:
        assert client.get_streams() == []


def test_a_decoding_secret_alone_signs_and_checks_http_tokens(server_factory):
    """As in Iggy 0.8, a decoding_secret without an encoding_secret serves as both: the old
    code ignored it and generated a secret (state/jwt_secret) (found by the docs audit)."""
    import httpx
    import jwt as pyjwt

    secret = "b" * 40
    srv = server_factory({"LURCHER_HTTP_ENABLED": "true", "LURCHER_HTTP_ADDRESS": "127.0.0.1:0",
                          "LURCHER_HTTP_JWT_DECODING_SECRET": secret})
    base = f"http://{srv.endpoints['http']}"
    login = httpx.post(f"{base}/users/login", json={"username": "iggy", "password": "iggy"})
    token = login.json()["access_token"]["token"]
    pyjwt.decode(token, secret, algorithms=["HS256"], options={"verify_aud": False})
    answer = httpx.get(f"{base}/streams", headers={"authorization": f"Bearer {token}"})
    assert answer.status_code == 200
    assert not (srv.data_dir / "state" / "jwt_secret").exists()


def test_help_lists_config_discovery_env_rule_and_data_location(tmp_path: Path):
    result = run_server_to_exit(["--help"], {}, cwd=tmp_path)
    assert result.returncode == 0
    text = result.stdout
    assert "--config" in text and "LURCHER_CONFIG_PATH" in text
    assert "LURCHER_<SECTION>_<KEY>" in text and "system.path" in text
    assert text.index("packaged defaults") < text.index("--config, or") < text.index(
        "environment variables")


def test_http_snapshot_answers_a_zip(server_factory):
    import io
    import zipfile

    import httpx

    srv = server_factory({"LURCHER_HTTP_ENABLED": "true", "LURCHER_HTTP_ADDRESS": "127.0.0.1:0"})
    base = f"http://{srv.endpoints['http']}"
    login = httpx.post(f"{base}/users/login", json={"username": "iggy", "password": "iggy"})
    token = login.json()["access_token"]["token"]
    auth = {"authorization": f"Bearer {token}"}
    answer = httpx.post(f"{base}/snapshot", json={"compression": "Deflated",
                                                  "snapshot_types": ["All"]},
                        headers=auth, timeout=30)
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/zip"
    assert "server_config.json" in zipfile.ZipFile(io.BytesIO(answer.content)).namelist()
    chosen = httpx.post(f"{base}/snapshot", json={"compression": "Stored",
                                                  "snapshot_types": ["ServerConfig", "Test"]},
                        headers=auth, timeout=30)
    archive = zipfile.ZipFile(io.BytesIO(chosen.content))
    assert sorted(archive.namelist()) == ["server_config.json", "test.txt"]
    assert {entry.compress_type for entry in archive.infolist()} == {zipfile.ZIP_STORED}


@pytest.mark.parametrize("body, status", [
    ({}, 422),                                                     # both fields required
    ({"compression": "Deflated"}, 422),
    ({"snapshot_types": ["All"]}, 422),
    ({"compression": "deflated", "snapshot_types": ["All"]}, 422),  # serde's variant names
    ({"compression": "Deflated", "snapshot_types": ["Everything"]}, 422),
    ({"compression": "Deflated", "snapshot_types": "All"}, 422),
    ({"compression": "Deflated", "snapshot_types": ["All", "Test"]}, 400)])  # InvalidCommand
def test_http_snapshot_takes_iggys_body(server_factory, body, status):
    """The body used to be ignored (every snapshot was Deflated and All)."""
    import httpx

    srv = server_factory({"LURCHER_HTTP_ENABLED": "true", "LURCHER_HTTP_ADDRESS": "127.0.0.1:0"})
    base = f"http://{srv.endpoints['http']}"
    login = httpx.post(f"{base}/users/login", json={"username": "iggy", "password": "iggy"})
    auth = {"authorization": f"Bearer {login.json()['access_token']['token']}"}
    answer = httpx.post(f"{base}/snapshot", json=body, headers=auth, timeout=30)
    assert answer.status_code == status, answer.text
