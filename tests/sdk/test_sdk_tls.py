"""TCP over TLS: the server's self-signed certificate trusted through ``tls_ca_file``; an
untrusted certificate is refused with CANNOT_ESTABLISH_CONNECTION."""

from __future__ import annotations

import pytest

from lurcher.sdk import Client, ErrorCode, IggyError


@pytest.fixture
def tls_server(server_factory):
    return server_factory({"LURCHER_TCP_TLS_ENABLED": "true"})


async def test_tls_with_ca_file(tls_server) -> None:
    cert = tls_server.data_dir / "certs" / "lurcher_cert.pem"
    assert cert.exists(), "TLS on with self_signed = true must generate a certificate"
    port = tls_server.tcp_port
    text = (f"iggy://iggy:iggy@127.0.0.1:{port}?tls=true&tls_domain=localhost"
            f"&tls_ca_file={cert}&heartbeat_interval=1h")
    async with Client.from_connection_string(text) as client:
        await client.create_stream("secure")
        assert [s.name for s in await client.get_streams()] == ["secure"]


async def test_untrusted_certificate_is_refused(tls_server) -> None:
    assert (tls_server.data_dir / "certs" / "lurcher_cert.pem").exists()
    client = Client(tls_server.tcp_address, username="iggy", password="iggy", tls=True,
                    tls_domain="localhost", heartbeat_interval_s=None)
    with pytest.raises(IggyError) as err:
        await client.connect()
    assert err.value.code == ErrorCode.CANNOT_ESTABLISH_CONNECTION
