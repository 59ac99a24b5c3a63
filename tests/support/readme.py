"""The code blocks of README.md, and running them against a real server.

``code_blocks()`` lists the fenced blocks (language, text, line). ``localize`` points the
addresses the README uses (TCP 127.0.0.1:8090, QUIC 127.0.0.1:8080, HTTP 127.0.0.1:3000,
WebSocket 127.0.0.1:8092) at a test server's bound ones. ``run_python`` executes a block in
this process, top-level ``await`` allowed, and returns what it printed.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import re
from dataclasses import dataclass
from typing import Any

from tests.support.server import REPO_ROOT, LurcherServer

README = REPO_ROOT / "README.md"
README_ADDRESSES = {"tcp": "127.0.0.1:8090", "quic": "127.0.0.1:8080", "http": "127.0.0.1:3000",
                    "websocket": "127.0.0.1:8092"}
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Block:
    lang: str
    text: str
    line: int

    @property
    def name(self) -> str:
        return f"README.md:{self.line} ({self.lang})"


def code_blocks() -> list[Block]:
    text = README.read_text()
    return [Block(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1)
            for m in FENCE.finditer(text)]


def localize(text: str, server: LurcherServer) -> str:
    for transport, address in README_ADDRESSES.items():
        if transport in server.endpoints:
            text = text.replace(address, server.endpoints[transport])
    return text


def run_python(source: str, namespace: dict[str, Any], timeout: float | None = None) -> str:
    """Execute ``source`` (may ``await`` at top level); what it printed. With ``timeout``
    a block that is still running then is cancelled (blocks that loop forever)."""
    code = compile(source, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = eval(code, namespace)  # noqa: S307 - the README's own code
        if asyncio.iscoroutine(result):
            async def bounded() -> None:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(result, timeout)
            asyncio.run(bounded())
    return out.getvalue()
