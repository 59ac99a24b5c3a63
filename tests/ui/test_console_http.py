"""The console's HTTP side against a real server (no browser): security headers, no inline
script and no HTML-string DOM APIs in the shipped files, every file served and declared as
package data, nothing outside the file list reachable, ``http.web_ui = false`` turns it
off, and the REST extension the lag view uses (a group's stored offset read over HTTP
without membership, as a TCP non-member reads it since Iggy 0.8 does).
"""

from __future__ import annotations

import fnmatch
import re
import tomllib

import httpx
import pytest

from lurcher.sdk.client import Client
from lurcher.transports.http.console import UI_DIR
from tests.support.server import REPO_ROOT
from tests.ui.conftest import HTTP_ON

HEADERS = {
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}
HTML_SINKS = re.compile(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function")


def ui_files() -> list[str]:
    return sorted(p.relative_to(UI_DIR).as_posix() for p in UI_DIR.rglob("*") if p.is_file())


def test_page_carries_security_headers(base_url: str) -> None:
    reply = httpx.get(f"{base_url}/ui")
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/html")
    for name, value in HEADERS.items():
        assert reply.headers[name] == value
    csp = reply.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp


def test_shipped_files_have_no_inline_script_or_html_sinks() -> None:
    index = (UI_DIR / "index.html").read_text()
    assert re.findall(r"<script(?![^>]*\bsrc=)", index) == []
    assert not re.search(r"\son[a-z]+=", index) and "<style" not in index
    for name in ui_files():
        if name.endswith(".js"):
            assert not HTML_SINKS.search((UI_DIR / name).read_text()), name


def test_every_file_is_served_and_declared_as_package_data(base_url: str) -> None:
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["lurcher.transports.http"]
    for name in ui_files():
        assert any(fnmatch.fnmatch(f"{name}", g.removeprefix("ui/")) for g in globs), name
        reply = httpx.get(f"{base_url}/ui/{name}")
        assert reply.status_code == 200, name
        assert reply.headers["x-content-type-options"] == "nosniff"
        assert reply.content == (UI_DIR / name).read_bytes()
    script = httpx.get(f"{base_url}/ui/js/main.js")
    assert script.headers["content-type"].startswith("text/javascript")


@pytest.mark.parametrize("path", ["/ui/nope.js", "/ui/%2e%2e/console.py", "/ui/..%2fconsole.py",
                                  "/ui/js/%2e%2e/%2e%2e/console.py", "/ui/app.css/x"])
def test_unknown_paths_are_404(base_url: str, path: str) -> None:
    reply = httpx.get(f"{base_url}{path}")
    assert reply.status_code == 404
    assert reply.headers["x-frame-options"] == "DENY"


def test_web_ui_false_turns_the_console_off(server_factory) -> None:
    server = server_factory({**HTTP_ON, "LURCHER_HTTP_WEB_UI": "false"})
    base = f"http://{server.endpoints['http']}"
    assert httpx.get(f"{base}/ui").status_code == 404
    assert httpx.get(f"{base}/ui/js/main.js").status_code == 404
    assert httpx.get(f"{base}/ping").text == "pong"


async def test_rest_reads_group_offset_without_membership(console_server, rest) -> None:
    rest.call("POST", "/streams", {"name": "offsets-s"}, ok=200)
    member = Client(console_server.tcp_address, username="iggy", password="iggy")
    outsider = Client(console_server.tcp_address, username="iggy", password="iggy")
    await member.connect()
    await outsider.connect()
    try:
        await member.create_topic("offsets-s", "offsets-t", 2)
        await member.send_messages("offsets-s", "offsets-t", [b"a", b"b", b"c"], 1)
        await member.create_consumer_group("offsets-s", "offsets-t", "offsets-g")
        await member.join_consumer_group("offsets-s", "offsets-t", "offsets-g")
        await member.store_consumer_offset("offsets-g", "offsets-s", "offsets-t", 1,
                                           partition_id=1, group=True)
        path = "/streams/offsets-s/topics/offsets-t/consumer-offsets"
        got = rest.call("GET", f"{path}?consumer_kind=consumer_group&consumer_id=offsets-g"
                        "&partition_id=1", ok=200)
        assert got == {"partition_id": 1, "current_offset": 2, "stored_offset": 1}
        plain = rest.http.get(f"{path}?consumer_id=offsets-g&partition_id=1")
        assert plain.status_code == 404, "a plain consumer of that name has no offset"
        bad = rest.http.get(f"{path}?consumer_kind=nobody&consumer_id=1&partition_id=1")
        assert bad.status_code == 400
        over_tcp = await outsider.get_consumer_offset("offsets-g", "offsets-s", "offsets-t", 1,
                                                      group=True)  # no membership (Iggy 0.8)
        assert (over_tcp.partition_id, over_tcp.stored_offset) == (1, 1)
    finally:
        await member.close()
        await outsider.close()
