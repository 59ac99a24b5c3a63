"""TLS handshakes count in the listeners' connection caps, on a real server with TLS on.

The event loop did the TLS handshake before our protocol's ``connection_made``, so a
connection still in it counted in no cap: under a limit of 256 open files, 300 connections
that never sent their ClientHello held the descriptors (for 60 s) and a logged-in client's
CreateTopic was answered Error 3000, new clients reset. Now a connection counts from its
accept, one beyond the cap is closed before its handshake, and the count goes down however
the handshake ends (done, failed, timed out, peer reset). Every read is bounded so a
regression fails instead of hanging.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import pytest

from tests.support import raw
from tests.support.server import LurcherServer
from tests.transports.conftest import (CaFiles, SlowTlsClient, _serve, all_served,
                                       handshake_but_last_flight, tls_env)

CAP = 4
STOP_S = 15.0
READ_S = 10.0
SERVED_WITHIN_S = 10.0
# the first bytes of a TLS 1.2 ClientHello record that announces more than it sends
HALF_CLIENT_HELLO = bytes.fromhex("160301020001") + b"\x00" * 10


def _context(ca: CaFiles) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca.ca_file))


def _tls_client(server: LurcherServer, ca: CaFiles) -> raw.RawClient:
    """A raw-frame client over TLS on the TCP listener (raises OSError when refused)."""
    client = raw.RawClient(server.tcp_address, timeout_s=READ_S)
    try:
        client.sock = _context(ca).wrap_socket(client.sock, server_hostname="localhost")
    except OSError:
        client.close()
        raise
    return client


def _half_open(stack: ExitStack, server: LurcherServer, listener: str, count: int,
               first: bytes = b"") -> list[socket.socket]:
    """``count`` connections to ``listener`` that send ``first`` and never finish their
    TLS handshake (closed with ``stack``)."""
    host, port = server.endpoints[listener].rsplit(":", 1)
    socks = []
    for _ in range(count):
        sock = stack.enter_context(socket.create_connection((host, int(port)), timeout=READ_S))
        sock.sendall(first)
        socks.append(sock)
    return socks


def _all_served(server: LurcherServer, ca: CaFiles, count: int) -> bool:
    """Whether ``count`` new TLS clients are all served at once (``all_served``)."""
    return all_served(lambda: _tls_client(server, ca), count, SERVED_WITHIN_S)


def _refused(server: LurcherServer, ca: CaFiles) -> bool:
    """Whether a new TLS client is closed before its handshake within a bounded wait (the
    connections held before may not all be accepted yet)."""
    deadline = time.monotonic() + SERVED_WITHIN_S
    while time.monotonic() < deadline:
        try:
            _tls_client(server, ca).close()
        except OSError:
            return True
    return False


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closes ``sock`` (its read ends, or is reset) within ``READ_S``."""
    try:
        return sock.recv(4096) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def _reset(sock: socket.socket) -> None:
    """Close ``sock`` with a reset (SO_LINGER 0) instead of a FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@pytest.fixture(scope="module")
def capped_tls_server(tmp_path_factory: pytest.TempPathFactory,
                      test_ca: CaFiles) -> Iterator[LurcherServer]:
    env = {**tls_env(test_ca), "LURCHER_LIMITS_BINARY_MAX_CONNECTIONS": str(CAP),
           "LURCHER_LIMITS_HTTP_MAX_CONNECTIONS": str(CAP)}
    yield from _serve(tmp_path_factory.mktemp("capped_tls"), env)


def test_connections_in_their_handshake_count_and_those_beyond_are_closed(
        capped_tls_server: LurcherServer, test_ca: CaFiles) -> None:
    with ExitStack() as stack:
        _half_open(stack, capped_tls_server, "tcp", 2)
        _half_open(stack, capped_tls_server, "websocket", 2, HALF_CLIENT_HELLO)
        assert _refused(capped_tls_server, test_ca)
    assert _all_served(capped_tls_server, test_ca, CAP)
    log = capped_tls_server.log_tail(10**6)
    assert "Traceback" not in log


def _one_beyond_closed(stack: ExitStack, server: LurcherServer, listener: str) -> bool:
    """Whether a new half-open connection to ``listener`` is closed by the server, within
    three tries (one of an earlier test may still count a moment, letting one more in)."""
    for _ in range(3):
        sock = _half_open(stack, server, listener, 1, HALF_CLIENT_HELLO)[0]
        sock.settimeout(READ_S / 5)
        if _closed_by_server(sock):
            return True
    return False


def test_the_cap_warnings_say_that_connections_beyond_are_closed_over_tls(
        capped_tls_server: LurcherServer, test_ca: CaFiles) -> None:
    """Over TLS a connection beyond the cap is closed before its handshake, on HTTPS as on
    the binary listeners (no 503: it would need the handshake); HTTPS's warning said
    "answered 503"."""
    with ExitStack() as stack:
        _half_open(stack, capped_tls_server, "http", CAP, HALF_CLIENT_HELLO)
        _half_open(stack, capped_tls_server, "tcp", CAP, HALF_CLIENT_HELLO)
        for listener in ("http", "tcp"):
            assert _one_beyond_closed(stack, capped_tls_server, listener)
    log = capped_tls_server.log_tail(10**6)
    assert (f"HTTP: {CAP} connections open (limits.http_max_connections, at most a quarter of "
            f"the open-files limit): new ones are closed before their TLS handshake until "
            f"fewer are open") in log
    assert "answered 503" not in log
    assert (f"TCP, WebSocket and Unix socket: {CAP} connections open "
            f"(limits.binary_max_connections, bounded by the open-files limit): new ones are "
            f"closed until fewer are open") in log
    assert _all_served(capped_tls_server, test_ca, CAP)


def test_the_count_goes_down_when_handshakes_fail_or_are_reset(
        capped_tls_server: LurcherServer, test_ca: CaFiles) -> None:
    with ExitStack() as stack:
        for sock in _half_open(stack, capped_tls_server, "tcp", CAP, b"not a ClientHello\r\n"):
            assert _closed_by_server(sock)  # the handshake failed
    assert _all_served(capped_tls_server, test_ca, CAP)
    with ExitStack() as stack:
        for sock in _half_open(stack, capped_tls_server, "tcp", CAP, HALF_CLIENT_HELLO):
            _reset(sock)
    assert _all_served(capped_tls_server, test_ca, CAP)
    assert "Traceback" not in capped_tls_server.log_tail(10**6)


def _pipelined_pings(server: LurcherServer, ca: CaFiles, count: int) -> bytes:
    """A TLS client whose handshake's last flight and ``count`` Pings go out in one write;
    what the server answers them. Raises OSError (refused: the connections of a test just
    before may still count)."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = _context(ca).wrap_bio(incoming, outgoing, server_hostname="localhost")
    with socket.create_connection(("127.0.0.1", server.tcp_port), timeout=READ_S) as sock:
        handshake_but_last_flight(sock, tls, incoming, outgoing)
        tls.write(struct.pack("<II", 4, raw.PING) * count)
        sock.sendall(outgoing.read())
        answers = b""
        while len(answers) < 8 * count:
            try:
                answers += tls.read(4096)
            except ssl.SSLWantReadError:
                if not (received := sock.recv(65536)):
                    break
                incoming.write(received)
        return answers


def _pipelined_answers(server: LurcherServer, ca: CaFiles, count: int) -> bytes:
    """``_pipelined_pings`` once the server takes the connection (a bounded wait)."""
    deadline = time.monotonic() + SERVED_WITHIN_S
    while True:
        try:
            return _pipelined_pings(server, ca, count)
        except OSError:
            if time.monotonic() > deadline:
                raise


def test_requests_that_come_with_the_end_of_the_handshake_are_answered(
        capped_tls_server: LurcherServer, test_ca: CaFiles) -> None:
    """They reach the server before the connection is handed to its protocol (the TLS
    layer has them then): passed on, in order."""
    for _ in range(5):
        assert _pipelined_answers(capped_tls_server, test_ca, 3) == struct.pack("<II", 0, 0) * 3


def _closed_with_the_handshake(server: LurcherServer, ca: CaFiles) -> None:
    """A TLS client whose handshake's last flight, a Ping and its close_notify go out in one
    write; returns once the server closed the connection. Raises OSError (refused: the
    connections of a test just before may still count)."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = _context(ca).wrap_bio(incoming, outgoing, server_hostname="localhost")
    with socket.create_connection(("127.0.0.1", server.tcp_port), timeout=READ_S) as sock:
        handshake_but_last_flight(sock, tls, incoming, outgoing)
        tls.write(struct.pack("<II", 4, raw.PING))
        try:
            tls.unwrap()  # its close_notify into ``outgoing``
        except ssl.SSLWantReadError:
            pass
        sock.sendall(outgoing.read())
        while sock.recv(65536):
            pass


def test_a_client_that_closes_with_the_end_of_its_handshake_logs_nothing(
        capped_tls_server: LurcherServer, test_ca: CaFiles) -> None:
    """A client that closes (TLS close_notify) with its handshake's last flight, as a load
    balancer's TLS health check does, had the TLS layer log asyncio's warning "returning
    true from eof_received() has no effect when using ssl" for each such connection: the
    close reached TlsHandshake before the hand-over. Nothing is logged now, and the count
    goes down."""
    deadline = time.monotonic() + SERVED_WITHIN_S
    for _ in range(3):
        while True:
            try:
                _closed_with_the_handshake(capped_tls_server, test_ca)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
    assert _all_served(capped_tls_server, test_ca, CAP)
    assert "eof_received" not in capped_tls_server.log_tail(10**6)


def test_a_handshake_not_done_within_the_login_timeout_is_dropped_and_uncounted(
        tmp_path, test_ca: CaFiles) -> None:
    env = {**tls_env(test_ca), "LURCHER_LIMITS_BINARY_MAX_CONNECTIONS": str(CAP),
           "LURCHER_LIMITS_LOGIN_TIMEOUT": "1 s"}
    with ExitStack() as stack:
        server = stack.enter_context(LurcherServer())
        server.start(tmp_path / "data", env)
        for sock in _half_open(stack, server, "tcp", CAP, HALF_CLIENT_HELLO):
            assert _closed_by_server(sock)
        assert _all_served(server, test_ca, CAP)


def _taken(server: LurcherServer) -> None:
    """Wait (bounded) until the server took what it takes of the half-open connections:
    a cap reached (logged), or its descriptors nearly used up."""
    deadline = time.monotonic() + SERVED_WITHIN_S
    while time.monotonic() < deadline:
        if ("connections open" in server.log_tail(10**6)
                or len(os.listdir(f"/proc/{server.pid}/fd")) > 240):
            return
        time.sleep(0.05)


def _topic_served(client: raw.RawClient, stream: str) -> None:
    """``client`` creates a 20-partition topic, sends to its last partition and polls."""
    client.create_stream(stream)
    client.create_topic(stream, "t", 20)
    client.send(stream, "t", raw.partition_id(19), [raw.message(b"kept")])
    assert [m.payload for m in client.poll(stream, "t", 19, count=1).messages] == [b"kept"]


@pytest.mark.parametrize("listener", ["tcp", "websocket", "http"])
def test_half_open_handshakes_leave_descriptors_for_logged_in_clients_and_storage(
        tmp_path, test_ca: CaFiles, listener: str) -> None:
    """Under a limit of 256 open files (no key set) the binary cap is a quarter, 64, and
    HTTP's too: 300 connections stuck in their handshake no longer leave a logged-in TLS
    client's new topic without its partition files; once they are gone, the cap's worth
    of new TLS clients is served again (and HTTPS answers)."""
    server = LurcherServer()
    server.open_files_limit = (256, 256)
    with server, ExitStack() as stack:
        server.start(tmp_path / "data", tls_env(test_ca))
        with _tls_client(server, test_ca) as client:
            client.login()
            _half_open(stack, server, listener, 300, HALF_CLIENT_HELLO)
            _taken(server)
            _topic_served(client, "s")
            stack.close()
        assert _all_served(server, test_ca, 64)
        with httpx.Client(verify=_context(test_ca), timeout=READ_S) as http:
            assert http.get(f"https://{server.endpoints['http']}/ping").status_code == 200
        assert "Traceback" not in server.log_tail(10**6)


def _held_at_the_last_flight(server: LurcherServer, ca: CaFiles,
                             first_requests: bytes) -> tuple[socket.socket, ssl.SSLObject,
                                                            ssl.MemoryBIO, ssl.MemoryBIO]:
    """A TLS client on the TCP listener whose handshake waits for its last flight, which
    is queued in its outgoing buffer with ``first_requests``."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = _context(ca).wrap_bio(incoming, outgoing, server_hostname="localhost")
    sock = socket.create_connection(("127.0.0.1", server.tcp_port), timeout=READ_S)
    handshake_but_last_flight(sock, tls, incoming, outgoing)
    tls.write(first_requests)
    return sock, tls, incoming, outgoing


def _statuses_until_closed(sock: socket.socket, tls: ssl.SSLObject,
                           incoming: ssl.MemoryBIO) -> list[int]:
    """The statuses of the answers ``sock`` gets before the server closes it (bounded)."""
    received = b""
    try:
        while data := sock.recv(65536):
            incoming.write(data)
            with contextlib.suppress(ssl.SSLWantReadError):
                received += tls.read(65536)
    except (OSError, ssl.SSLError):
        pass
    statuses = []
    while len(received) >= 8:
        status, length = struct.unpack_from("<II", received)
        statuses.append(status)
        received = received[8 + length:]
    return statuses


def _request_in_flight(stack: ExitStack, server: LurcherServer, ca: CaFiles) -> None:
    """An HTTPS request whose body never comes: the stopping server waits for it (at most
    the 5 s it gives each listener to close)."""
    host, port = server.endpoints["http"].rsplit(":", 1)
    sock = stack.enter_context(_context(ca).wrap_socket(
        socket.create_connection((host, int(port)), timeout=READ_S), server_hostname="localhost"))
    sock.sendall(b"POST /users/login HTTP/1.1\r\nHost: localhost\r\n"
                 b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{")


def _wait_for_log(server: LurcherServer, line: str) -> None:
    deadline = time.monotonic() + SERVED_WITHIN_S
    while line not in server.log_tail(10**6):
        assert time.monotonic() < deadline, server.log_tail()
        time.sleep(0.01)


def test_handshakes_done_after_a_stop_began_are_not_served(tmp_path, test_ca: CaFiles) -> None:
    """A SIGTERM while TLS handshakes are in flight: those that finished once the server was
    stopping (here: while it waits for an HTTPS request) were handed to their protocol
    after the shard had disconnected every session and closed, so each opened a session
    ("connected" after "stopping") and had its login dispatched there. Now the listener's
    close aborts its handshakes in flight: no client gets an answer, and the server exits
    0."""
    login = raw.login_payload("iggy", "iggy")
    first_requests = struct.pack("<II", 4 + len(login), raw.LOGIN_USER) + login
    with LurcherServer() as server:
        server.start(tmp_path / "data", tls_env(test_ca))
        with ExitStack() as stack:
            _request_in_flight(stack, server, test_ca)
            clients = [_held_at_the_last_flight(server, test_ca, first_requests)
                       for _ in range(10)]
            for sock, *_ in clients:
                stack.enter_context(sock)
            server.proc.send_signal(signal.SIGTERM)
            _wait_for_log(server, "INFO lurcher.server: stopping")
            for sock, _, _, outgoing in clients:
                with contextlib.suppress(OSError):
                    sock.sendall(outgoing.read())
            answers = [_statuses_until_closed(sock, tls, incoming)
                       for sock, tls, incoming, _ in clients]
        assert server.proc.wait(STOP_S) == 0
        log = server.log_tail(10**6)
    assert answers == [[]] * len(clients)
    stopping = log.index("INFO lurcher.server: stopping")
    assert "connected" not in log[stopping:].replace("disconnected", ""), log[stopping:]
    assert "Traceback" not in log


def test_silent_https_connections_cut_by_the_header_deadline_leave_the_cap_at_once(
        tmp_path, test_ca: CaFiles) -> None:
    """HTTPS connections that finish their handshake and send nothing are cut by the header
    deadline; they were closed gracefully, so the TLS layer sent close_notify and waited
    for the client's, which never came, for the loop's 30 s: they stayed counted and new
    HTTPS clients were refused all that time. They are dropped at once now."""
    env = {**tls_env(test_ca), "LURCHER_LIMITS_HTTP_MAX_CONNECTIONS": str(CAP),
           "LURCHER_LIMITS_HTTP_HEADER_TIMEOUT": "2 s"}
    with LurcherServer() as server, ExitStack() as stack:
        server.start(tmp_path / "data", env)
        silent = [SlowTlsClient(server.endpoints["http"], test_ca, READ_S) for _ in range(CAP)]
        for client in silent:
            stack.enter_context(client.sock)
            client.finish_after(0)
        for client in silent:
            assert client.closed_before(time.monotonic() + READ_S)
        deadline = time.monotonic() + SERVED_WITHIN_S
        with httpx.Client(verify=_context(test_ca), timeout=READ_S) as http:
            while True:  # the drops reach the server's count a moment after the clients
                try:
                    assert http.get(f"https://{server.endpoints['http']}/ping").status_code == 200
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline, "the silent connections still count"
        assert "Traceback" not in server.log_tail(10**6)
