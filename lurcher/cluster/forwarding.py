"""Node-to-node calls: run a partition operation on the node whose replica is the primary.

A call is ``(kind, group, body)``; the answer is ``(status, payload)`` or "not primary". They
travel over the cluster links on ``FORWARD_GROUP`` as the replication core's ``Request``
(call) and ``Reply`` (answer) values, so no second connection, handshake or codec is needed.
``on_primary(group, kind, body, deadline)`` finds the primary and runs the call there (here,
without any encoding, when this node is it):

- a member of the group asks its own replica who is primary; while a view change is under
  way it waits a tick and asks again;
- a node outside the group tries the members in turn, starting with the view-0 primary;
  one that is not (or no longer) primary answers so and the next is tried;
- a call is sent once: it is never resent to another node after it may have reached one
  (a resent append could store a batch twice), except after "not primary", which means
  nothing was done. A call that gets no answer fails at ``deadline``.

Every failure to finish by the deadline is TaskTimeout (12001), the code the metadata group
uses for "no quorum": 0.8's clients do not reconnect on it and the caller may retry.
Invariants: at most ``MAX_CALLS`` calls wait for answers on a node, and at most as many
calls from each other node run on it; more are refused at once (TaskTimeout). An answer that does
not decode fails its call (Error) and leaves the link up.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from lurcher.cluster.host import FORWARD_GROUP
from lurcher.core.replication.messages import Message, Reply, Request
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

log = logging.getLogger(__name__)

MAX_CALLS = 10_000
Handler = Callable[[int, bytes], Awaitable[Any]]  # (group, body) -> result, run on the primary


class NotPrimary(Exception):
    """This node's replica is not the group's primary in normal operation."""


class Call(msgspec.Struct, array_like=True, frozen=True):
    kind: str
    group: int
    body: memoryview  # decoded as a view into the received frame, not copied


class Answer(msgspec.Struct, array_like=True, frozen=True):
    status: int  # 0: done; -1: not primary; else the IggyError's code
    payload: bytes = b""


_call_decoder = msgspec.msgpack.Decoder(Call)
_answer_decoder = msgspec.msgpack.Decoder(Answer)


def timed_out(what: str, timeout_s: float) -> IggyError:
    return IggyError(ErrorCode.TASK_TIMEOUT, f"{what} not done within {timeout_s:g}s: its "
                                             f"replication group has no quorum or primary")


class Forwarder:
    def __init__(self, node: Any, handlers: dict[str, Handler],
                 encode_result: Callable[[Any], bytes], timeout_s: float,
                 anywhere: set[str] = frozenset()) -> None:
        """``handlers`` run on the primary, those named in ``anywhere`` on any member;
        ``encode_result`` turns their result into the answer's payload for a caller on
        another node."""
        self.node, self.handlers, self.encode_result = node, handlers, encode_result
        self.timeout_s, self.anywhere = timeout_s, anywhere
        self.waiting: dict[int, asyncio.Future] = {}
        self.answering: dict[int, set[asyncio.Task]] = {}  # per node: its calls running here
        self.ids = itertools.count(1)
        node.on_forward = self._on_message

    async def on_primary(self, group: int, kind: str, body: bytes) -> Any:
        """Run ``kind`` on ``group``'s primary: the handler's result when run here, else the
        answer's payload (bytes). Raises IggyError (TASK_TIMEOUT after ``timeout_s``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        members = self.node.members_of(group)
        for attempt in itertools.count():
            target = self._target(group, members, attempt)
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise timed_out(kind, self.timeout_s)
            try:
                if target is None:
                    pass  # a view change is under way: ask again after a tick
                elif target == self.node.index:
                    return await asyncio.wait_for(self._run(kind, group, body), remaining)
                else:
                    return await self._call(target, Call(kind, group, body), remaining)
            except NotPrimary:
                pass
            except asyncio.TimeoutError:
                raise timed_out(kind, self.timeout_s) from None
            await asyncio.sleep(min(self.node.config.tick_ms / 1000, max(remaining, 0)))
        raise AssertionError("unreachable")

    async def on_any_other(self, group: int, kind: str, body: bytes) -> bytes:
        """Run ``kind`` (one of ``anywhere``) on the first other member that answers it.
        Raises IggyError when none did within ``timeout_s`` each."""
        failure: Exception = IggyError(ErrorCode.TASK_TIMEOUT, "no other member")
        for member in self.node.members_of(group):
            if member == self.node.index:
                continue
            try:
                return await self._call(member, Call(kind, group, body), self.timeout_s)
            except (IggyError, NotPrimary, asyncio.TimeoutError) as exc:
                failure = exc if isinstance(exc, IggyError) else timed_out(kind, 0)
        raise failure

    async def on_each_other(self, group: int, kind: str, body: bytes) -> list[bytes] | None:
        """Run ``kind`` (one of ``anywhere``) on every other member of ``group`` at once:
        their answers, or None when any did not answer it within ``timeout_s``."""
        others = [m for m in self.node.members_of(group) if m != self.node.index]
        answers = await asyncio.gather(*(self._call(m, Call(kind, group, body), self.timeout_s)
                                         for m in others), return_exceptions=True)
        return None if any(isinstance(a, BaseException) for a in answers) else answers

    def _target(self, group: int, members: list[int], attempt: int) -> int | None:
        if group in self.node.groups:
            return self.node.leader(group)
        return members[attempt % len(members)]

    async def _run(self, kind: str, group: int, body: bytes) -> Any:
        if kind not in self.anywhere and not self.node.is_primary(group):
            raise NotPrimary
        return await self.handlers[kind](group, body)

    async def _call(self, target: int, call: Call, timeout_s: float) -> bytes:
        if len(self.waiting) >= MAX_CALLS:
            raise IggyError(ErrorCode.TASK_TIMEOUT, f"{len(self.waiting)} calls to other "
                                                    f"nodes wait already")
        rid = next(self.ids)
        if not self.node.links.send(target, FORWARD_GROUP,
                                    Request(rid, rid, msgspec.msgpack.encode(call))):
            raise NotPrimary  # link down: nothing was sent, try again
        future = asyncio.get_running_loop().create_future()
        self.waiting[rid] = future
        try:
            answer: Answer = await asyncio.wait_for(future, timeout_s)
        finally:
            self.waiting.pop(rid, None)
        if answer.status == -1:
            raise NotPrimary
        if answer.status:
            raise IggyError(answer.status, f"from node {self.node.config.names[target]}")
        return answer.payload

    # ---- the other side ------------------------------------------------------------

    def _on_message(self, peer: int, message: Message) -> None:
        if isinstance(message, Reply):
            future = self.waiting.get(message.request)
            if future is not None and not future.done():
                _settle(future, peer, message.result)
        elif isinstance(message, Request):
            self._start_answer(peer, message)

    def _start_answer(self, peer: int, request: Request) -> None:
        """Run a call from ``peer``, or refuse it at once when ``MAX_CALLS`` of ``peer``'s
        already run (each other node has its own share)."""
        running = self.answering.setdefault(peer, set())
        if len(running) >= MAX_CALLS:
            self._reply(peer, request, Answer(int(ErrorCode.TASK_TIMEOUT)))
            return
        task = asyncio.ensure_future(self._answer(peer, request))
        running.add(task)
        task.add_done_callback(running.discard)

    def _reply(self, peer: int, request: Request, answer: Answer) -> None:
        self.node.links.send(peer, FORWARD_GROUP, Reply(0, request.client, request.request,
                                                        msgspec.msgpack.encode(answer)))

    async def _answer(self, peer: int, request: Request) -> None:
        try:
            call = _call_decoder.decode(request.body)
        except (msgspec.DecodeError, msgspec.ValidationError):
            call = None
        if call is None or call.kind not in self.handlers:
            log.warning("forwarded call from node %d does not decode or names no handler",
                        peer)
            answer = Answer(int(ErrorCode.INVALID_COMMAND))
        else:
            answer = await self._answer_call(call, request)
        self._reply(peer, request, answer)

    async def _answer_call(self, call: Call, request: Request) -> Answer:
        try:
            result = await asyncio.wait_for(self._run(call.kind, call.group, call.body),
                                            self.timeout_s)
            return Answer(0, self.encode_result(result))
        except NotPrimary:
            return Answer(-1)
        except IggyError as exc:
            return Answer(exc.status)
        except asyncio.TimeoutError:
            return Answer(int(ErrorCode.TASK_TIMEOUT))
        except Exception:  # a bug: answer it rather than leave the caller waiting
            log.exception("forwarded %r failed", bytes(request.body[:32]))
            return Answer(int(ErrorCode.ERROR))


def _settle(future: asyncio.Future, peer: int, result: bytes) -> None:
    """Complete a waiting call with ``peer``'s answer, or fail it when that does not decode
    (which would otherwise raise in the link's receive path and drop the link)."""
    try:
        future.set_result(_answer_decoder.decode(result))
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        future.set_exception(IggyError(ErrorCode.ERROR, f"undecodable answer from node "
                                                        f"{peer}: {exc}"))
