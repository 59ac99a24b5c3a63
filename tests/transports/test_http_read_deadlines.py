"""The HTTP listener's read deadlines (``limits.http_header_timeout``,
``limits.http_body_timeout``, ``limits.http_body_min_rate``), over plain HTTP and HTTPS,
on a real server.

A connection that sends nothing, a header or a body trickled in too slowly (slowloris)
were held open forever; now each is closed (408 when part of a request came), while a
body arriving in pieces closer together than the body timeout is served, and the server
keeps serving. Every read below is bounded so a regression fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.support.server import LurcherServer
from tests.support.trickle import NEVER_S, trickle
from tests.transports.conftest import ALL_ON, CaFiles, SlowTlsClient, _serve, tls_env

TIMEOUT = {"LURCHER_LIMITS_HTTP_HEADER_TIMEOUT": "2 s",
           "LURCHER_LIMITS_HTTP_BODY_TIMEOUT": "2 s",
           "LURCHER_LIMITS_HTTP_BODY_MIN_RATE": "1 B"}
LOGIN = json.dumps({"username": "iggy", "password": "iggy"}).encode()
# a body byte this often: inside the 2 s body timeout with half a second to spare for a
# client late on a loaded machine (1.8 s left 0.2 s: a late byte was cut by the gap instead)
DRIP_S = 1.5


@pytest.fixture(scope="module", params=["http", "https"])
def deadline_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                    test_ca: CaFiles) -> Iterator[tuple[LurcherServer, ssl.SSLContext | None]]:
    context, env = None, {**ALL_ON, **TIMEOUT}
    if request.param == "https":
        context = ssl.create_default_context(cafile=str(test_ca.ca_file))
        env = {**tls_env(test_ca), **TIMEOUT}
    for server in _serve(tmp_path_factory.mktemp(request.param), env):
        yield server, context


async def _open(server: LurcherServer, context: ssl.SSLContext | None):
    host, port = server.endpoints["http"].rsplit(":", 1)
    return await asyncio.open_connection(host, int(port), ssl=context)


async def _answer(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection."""
    return await asyncio.wait_for(reader.read(), NEVER_S)


async def _send_then_wait(server, context, data: bytes) -> bytes:
    """Send ``data`` (perhaps nothing), then wait for the server to close."""
    reader, writer = await _open(server, context)
    writer.write(data)
    try:
        return await _answer(reader)
    finally:
        writer.close()


async def _trickled_header(server, context) -> bytes:
    reader, writer = await _open(server, context)
    header = b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200 + b"\r\n\r\n"
    try:  # 50 s at this pace: the deadline must cut it
        return await trickle(reader, writer, header)
    finally:
        writer.close()


def _post(length: int) -> bytes:
    return (b"POST /users/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: " + str(length).encode() + b"\r\n\r\n")


async def _slow_but_steady_body(server, context) -> bytes:
    """Eight pieces 0.5 s apart: 3.5 s in all, more than either deadline, no gap near it."""
    reader, writer = await _open(server, context)
    writer.write(_post(len(LOGIN)))
    step = -(-len(LOGIN) // 8)
    pieces = [LOGIN[i:i + step] for i in range(0, len(LOGIN), step)]
    try:
        for piece in pieces:
            await asyncio.sleep(0.5)
            writer.write(piece)
            await writer.drain()
        return await _answer(reader)
    finally:
        writer.close()


async def test_slow_requests_are_cut_and_steady_ones_served(deadline_server) -> None:
    server, context = deadline_server
    silent, header, body, steady = await asyncio.gather(
        _send_then_wait(server, context, b""), _trickled_header(server, context),
        _send_then_wait(server, context, _post(len(LOGIN)) + LOGIN[:5]),
        _slow_but_steady_body(server, context))
    assert silent == b""
    assert header.startswith(b"HTTP/1.1 408 "), header[:80]
    assert body.startswith(b"HTTP/1.1 408 "), body[:80]
    assert steady.startswith(b"HTTP/1.1 200 ") and b"access_token" in steady, steady[:200]
    scheme = "https" if context else "http"
    async with httpx.AsyncClient(base_url=f"{scheme}://{server.endpoints['http']}",
                                 verify=context or True) as http:
        assert (await http.get("/ping")).text == "pong"
    log = server.log_tail()
    assert "request header not received within 2 s" in log
    assert "request body not received within 2 s" in log
    assert "Traceback" not in log


async def test_a_kept_alive_connection_gets_a_new_header_deadline(deadline_server) -> None:
    """After a response, the next request's header has its own deadline: trickling it
    keeps resetting uvicorn's keep-alive timer, but not this one."""
    server, context = deadline_server
    reader, writer = await _open(server, context)
    try:
        writer.write(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        first = await asyncio.wait_for(reader.readuntil(b"pong"), NEVER_S)
        assert first.startswith(b"HTTP/1.1 200 ")
        late = await trickle(reader, writer, b"GET /ping HTTP/1.1\r\nX-Slow: " + b"a" * 200)
        assert late.startswith(b"HTTP/1.1 408 "), late[:80]
    finally:
        writer.close()


async def test_a_body_dripped_inside_the_gap_is_cut_by_its_rate(deadline_server) -> None:
    """A byte every DRIP_S never leaves the 2 s body timer run out, and was held for as
    long as the body's length said; at least 1 byte a second after 2 s of grace, it falls
    behind that rate 6 to 7 s in, long before its 8 bytes (10.5 s at that pace) are all
    sent."""
    server, context = deadline_server
    reader, writer = await _open(server, context)
    try:
        writer.write(_post(8))
        answer = await trickle(reader, writer, b'{"a": 1}', pace_s=DRIP_S)
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:80]
    assert "request body slower than 1 bytes/s" in server.log_tail()


def test_a_slow_tls_handshake_does_not_extend_the_first_header_deadline(
        tmp_path, test_ca: CaFiles) -> None:
    """The first header's deadline ran from the protocol's connection_made, after the TLS
    handshake, itself allowed the header timeout: a client could hold an HTTPS connection
    for up to twice it without a request. It runs from the accept now: a client whose
    handshake took 3 of the 4 s, then sends nothing, is closed before 4 s more passed."""
    env = {**tls_env(test_ca), "LURCHER_LIMITS_HTTP_HEADER_TIMEOUT": "4 s"}
    with LurcherServer() as server:
        server.start(tmp_path / "data", env)
        client = SlowTlsClient(server.endpoints["http"], test_ca, 20.0)
        with client.sock:
            client.finish_after(3.0)
            # the old deadline ran from the handshake's end: the close came after this
            assert client.closed_before(time.monotonic() + 4.0)
        assert "request header not received within 4 s" in server.log_tail()
