"""A metadata log damaged in the middle stops the start with one line, never a traceback,
and without cutting the acknowledged records that follow the damage."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.raw import RawClient
from tests.support.server import ServerError, ServerFactory


def test_damaged_middle_record_refuses_to_start(server_factory: ServerFactory):
    server = server_factory()
    with RawClient(server.tcp_address) as client:
        client.login()
        for i in range(5):
            client.create_stream(f"s{i}")
    server.stop()
    log = Path(server.data_dir) / "state" / "log"
    data = bytearray(log.read_bytes())
    data[len(data) // 2] ^= 0xFF
    log.write_bytes(bytes(data))
    with pytest.raises(ServerError) as info:
        server.restart()
    output = info.value.args[0].split("===== start #2", 1)[1]
    assert "exited with 1" in info.value.args[0]
    assert "Traceback" not in output
    lines = [line for line in output.splitlines() if "cannot start" in line]
    assert len(lines) == 1 and "metadata log" in lines[0] and "refusing to start" in lines[0]
    assert log.read_bytes() == bytes(data)
