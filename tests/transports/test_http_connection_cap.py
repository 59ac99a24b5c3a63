"""The HTTP listener's connection cap (``limits.http_max_connections``, at most a quarter of
the open-files limit), on a real server.

The HTTP listener took every connection the kernel handed it; one that sends nothing is
held until ``limits.http_header_timeout``, so a client opening idle connections used up the
process's descriptors: TCP clients were reset and a topic's partition directory could not
be created (an adversarial probe: 450 idle connections under a limit of 400 open files).
Now a connection beyond the cap is answered 503 and closed, and the rest keep serving.
Every read below is bounded so a regression fails instead of hanging.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import pytest

from tests.support import raw
from tests.support.idle import answer_until_closed, idle_connections
from tests.support.server import LurcherServer
from tests.transports.conftest import ALL_ON, _serve

CAP = 8
READ_S = 10.0
SERVED_WITHIN_S = 10.0


@pytest.fixture(scope="module")
def capped_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LurcherServer]:
    env = {**ALL_ON, "LURCHER_LIMITS_HTTP_MAX_CONNECTIONS": str(CAP)}
    yield from _serve(tmp_path_factory.mktemp("capped"), env)


def _idle(stack: ExitStack, server: LurcherServer, count: int) -> list[socket.socket]:
    """``count`` HTTP connections that send nothing (closed with ``stack``)."""
    host, port = server.endpoints["http"].rsplit(":", 1)
    return idle_connections(stack, host, int(port), count, READ_S)


def _served_again(server: LurcherServer) -> int:
    """The status of GET /ping once the server serves HTTP again (bounded wait)."""
    deadline = time.monotonic() + SERVED_WITHIN_S
    with httpx.Client(base_url=f"http://{server.endpoints['http']}", timeout=READ_S) as http:
        while True:
            status = http.get("/ping").status_code
            if status == 200 or time.monotonic() > deadline:
                return status


def test_a_connection_beyond_the_cap_is_answered_503_and_closed(
        capped_server: LurcherServer) -> None:
    with ExitStack() as stack:
        _idle(stack, capped_server, CAP)
        beyond = _idle(stack, capped_server, 1)[0]
        answer = answer_until_closed(beyond)
        assert answer.startswith(b"HTTP/1.1 503 "), answer
        assert answer.endswith(b"too many connections")
        with raw.RawClient(capped_server.tcp_address) as tcp:  # other listeners are not capped
            tcp.login()
            tcp.ping()
    assert _served_again(capped_server) == 200  # the idle ones closed: served again
    log = capped_server.log_tail(10**6)
    assert log.count(f"HTTP: {CAP} connections open") == 1
    assert "Traceback" not in log


def test_idle_http_connections_leave_descriptors_for_tcp_clients_and_storage(
        tmp_path) -> None:
    """Under a limit of 256 open files (no key set) the cap is 64: 300 idle HTTP
    connections no longer leave a new TCP client reset nor a new topic without its
    partition files."""
    server = LurcherServer()
    server.open_files_limit = (256, 256)
    with server, ExitStack() as stack:
        server.start(tmp_path / "data", ALL_ON)
        _idle(stack, server, 300)
        with raw.RawClient(server.tcp_address, timeout_s=READ_S) as tcp:
            tcp.login()
            tcp.create_stream("s")
            tcp.create_topic("s", "t", 20)
            tcp.send("s", "t", raw.partition_id(19), [raw.message(b"kept")])
            assert [m.payload for m in tcp.poll("s", "t", 19, count=1).messages] == [b"kept"]
        stack.close()
        assert _served_again(server) == 200
        assert "Traceback" not in server.log_tail(10**6)
