"""cluster.forwarding against what another node (holding the cluster secret) may send: an
answer that does not decode failed inside the link's receive path (traceback, link
dropped) and left the call waiting; calls from a node started a task each without bound;
a call that does not decode was logged with a traceback. Driven without sockets: the
links are a list of what was sent."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from lurcher.cluster import forwarding
from lurcher.cluster.forwarding import Answer, Call, Forwarder
from lurcher.core.replication.messages import Reply, Request
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError


class _Links:
    def __init__(self) -> None:
        self.sent: list[tuple[int, int, object]] = []

    def send(self, peer: int, group: int, message: object) -> bool:
        self.sent.append((peer, group, message))
        return True


class _Node:
    """What a Forwarder uses of a cluster node: its links and the forward hook."""

    def __init__(self) -> None:
        self.links = _Links()
        self.on_forward = None

    def is_primary(self, group: int) -> bool:
        return True


def _answers(node: _Node) -> list[Answer]:
    return [msgspec.msgpack.decode(m.result, type=Answer) for _, _, m in node.links.sent]


async def test_an_undecodable_answer_fails_its_call_not_the_link() -> None:
    node = _Node()
    forwarder = Forwarder(node, {}, bytes, timeout_s=5.0)
    call = asyncio.ensure_future(forwarder._call(1, Call("append", 0, memoryview(b"")), 5.0))
    await asyncio.sleep(0)
    [(_, _, request)] = node.links.sent
    node.on_forward(1, Reply(0, request.client, request.request, b"\xc1 not msgpack"))
    with pytest.raises(IggyError) as failed:
        await call
    assert failed.value.status == ErrorCode.ERROR


async def test_calls_from_other_nodes_are_bounded(monkeypatch) -> None:
    monkeypatch.setattr(forwarding, "MAX_CALLS", 3)
    release = asyncio.Event()

    async def held(group: int, body: bytes) -> bytes:
        await release.wait()
        return b"done"

    node = _Node()
    forwarder = Forwarder(node, {"append": held}, bytes, timeout_s=5.0)
    body = msgspec.msgpack.encode(Call("append", 0, memoryview(b"x")))
    for i in range(5):
        node.on_forward(1, Request(i, i, body))
    node.on_forward(2, Request(9, 9, body))  # another node has its own share
    await asyncio.sleep(0)
    assert [len(forwarder.answering[peer]) for peer in (1, 2)] == [3, 1]
    assert [a.status for a in _answers(node)] == [ErrorCode.TASK_TIMEOUT] * 2
    release.set()
    await asyncio.sleep(0.05)
    assert [a.status for a in _answers(node)][2:] == [0, 0, 0, 0]
    assert not any(forwarder.answering.values())


async def test_a_handler_failing_is_an_error_not_an_unknown_call(caplog) -> None:
    """A KeyError raised inside a handler is a bug to log with its traceback and answer
    Error, not "does not decode or names no handler"."""
    async def broken(group: int, body: bytes) -> bytes:
        return {}[group]

    node = _Node()
    Forwarder(node, {"append": broken}, bytes, timeout_s=5.0)
    node.on_forward(1, Request(1, 1, msgspec.msgpack.encode(Call("append", 4, memoryview(b"")))))
    await asyncio.sleep(0.05)
    assert [a.status for a in _answers(node)] == [ErrorCode.ERROR]
    assert "forwarded" in caplog.text and "KeyError" in caplog.text


async def test_an_undecodable_call_is_answered_invalid_command() -> None:
    node = _Node()
    Forwarder(node, {}, bytes, timeout_s=5.0)
    node.on_forward(1, Request(7, 7, b"\xc1"))
    node.on_forward(1, Request(8, 8, msgspec.msgpack.encode(Call("nope", 0, memoryview(b"")))))
    await asyncio.sleep(0.05)
    assert [a.status for a in _answers(node)] == [ErrorCode.INVALID_COMMAND] * 2
