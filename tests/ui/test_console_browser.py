"""The web console in a real headless Chromium against a real lurcher-server.

Scenarios: sign in, create a stream and a topic, send from the page and see the message in
the browser and the live tail, then a message from the official client arrives in the tail
without a reload; the tail goes on after a purge; the send form refuses values it cannot
encode; a topic's never and unlimited are sent as such, not as the server's default; the
overview's live chart; personal-access-token sign-in (token shown once), a token's expiry
taken in seconds and a token named with a slash deleted; consumer-group lag, also of 3
groups over 1,000 partitions; a read-only user gets no delete buttons and the server refuses
the forged request; pages follow permissions changed while the console is open; a tab
reloaded on a revoked session shows the sign-in form, and signing in again returns to the
page the session ended on; a console in use outlives its token (refreshed); a server out of
reach is said so; stored HTML/script in names and payloads renders as text and runs nothing;
bidi controls in names do not reorder the page's words and invisible characters are shown as
marks; 255-character names wrap inside the page; page weight of the first load; paging
through a partition; rendering 1,000 messages (time reported, not asserted); huge payloads
cut and laid out only in view, at most 50 headers a message, and JSON numbers shown as
written.
Screenshots and measurements are written to ``test-artifacts/ui``.
"""

from __future__ import annotations

import base64
import json
import time

import jwt as pyjwt
import pytest
from apache_iggy import SendMessage

from lurcher.sdk.client import Client
from tests.support.browser import artifact
from tests.support.official import connect_client
from tests.support.server import LurcherServer
from tests.ui.conftest import HTTP_ON, Page, Rest

pytestmark = pytest.mark.slow

WEIGHT_LIMIT = 500_000
BIG_ID = str(2**128 - 12345)
U64_MAX = 2**64 - 1
XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


TOPIC_SETTINGS = {"compression_algorithm": "none", "message_expiry": 0, "max_topic_size": 0}


def stream_id(rest, name: str) -> int:
    return next(s["id"] for s in rest.call("GET", "/streams") if s["name"] == name)


def make_topic(rest, stream: str, topic: str, partitions: int = 1) -> tuple[int, int]:
    rest.call("POST", "/streams", {"name": stream}, ok=200)
    sid = stream_id(rest, stream)
    created = rest.call("POST", f"/streams/{sid}/topics",
                        {"name": topic, "partitions_count": partitions, **TOPIC_SETTINGS}, ok=200)
    return sid, created["id"]


def send(rest, sid: int, tid: int, payloads: list[str], partition: int = 0) -> None:
    rest.call("POST", f"/streams/{sid}/topics/{tid}/messages", {
        "partitioning": {"kind": "partition_id", "value": b64_u32(partition)},
        "messages": [{"payload": b64(p)} for p in payloads]}, ok=201)


def b64_u32(n: int) -> str:
    return base64.b64encode(n.to_bytes(4, "little")).decode()


def click_link(page, container: str, text: str) -> None:
    page.wait(lambda: any(a.text == text for a in page.css(f"{container} a")), f"link {text}")
    next(a for a in page.css(f"{container} a") if a.text == text).click()


def test_create_send_browse_and_tail_with_official_client(page, rest, loop, console_server):
    page.sign_in()
    page.go("#/streams")
    page.type("#stream-name", "orders")
    page.one("#create-stream button[type=submit]").click()
    click_link(page, "#streams-table", "orders")
    page.type("#topic-name", "events")
    page.one("#create-topic button[type=submit]").click()
    click_link(page, "#topics-table", "events")
    click_link(page, ".tabs", "Messages")
    page.script("window.__sameDocument = 42")
    page.one("#tail-toggle").click()
    page.wait(lambda: page.text("#tail-state").startswith("following"), "tail running")

    page.type("#send-payload", '{"order": 1, "item": "lamp"}')
    page.type("#send-headers", "source=console\nattempt:uint32=3")
    page.type("#send-id", BIG_ID)
    page.one("#send-submit").click()
    page.wait(lambda: '"item": "lamp"' in page.text("#tail"), "page message in the tail")
    tail = page.text("#tail")
    assert "source (string) = console" in tail and "attempt (uint32) = 3" in tail
    assert f"id {BIG_ID}" in tail, "128-bit message id not shown exactly"

    page.one("#poll-submit").click()
    page.wait(lambda: len(page.css("#messages article")) == 1, "polled message")
    assert '"order": 1' in page.text("#messages")

    async def official_send() -> None:
        client = await connect_client(console_server)
        await client.send_messages("orders", "events", 0, [SendMessage("from the official client")])

    loop.run(official_send())
    page.wait(lambda: "from the official client" in page.text("#tail"), "official message in tail")
    assert len(page.css("#tail article")) == 2
    assert page.script("return window.__sameDocument") == 42, "the page was reloaded"
    page.one("#poll-submit").click()
    page.wait(lambda: len(page.css("#messages article")) == 2, "both messages polled")
    page.screenshot(artifact("message-browser.png"))

    sid = stream_id(rest, "orders")
    stored = rest.call("GET", f"/streams/{sid}/topics/0/messages?partition_id=0&kind=first&count=10")
    payloads = [base64.b64decode(m["payload"]).decode() for m in stored["messages"]]
    assert payloads == ['{"order": 1, "item": "lamp"}', "from the official client"]


def test_send_form_refuses_values_it_cannot_encode(page, rest):
    """The send form wrote the partition id and fixed-size header values with DataView's
    setters, which made "abc" and "" partition 0, "3x" a uint32 0 and 300 an int8 44: the
    message went to another partition, or with other headers, than the operator typed."""
    sid, tid = make_topic(rest, "typed-s", "typed-t", partitions=2)
    page.sign_in()
    page.go(f"#/streams/{sid}/topics/{tid}/messages")
    page.choose("#send-form select[name=partitioning]", "partition_id")
    page.type("#send-payload", "typed")
    for partition, headers, refusal in (("abc", "", "partition id: not a whole number"),
                                        ("4294967297", "", "partition id: 4294967297 is out"),
                                        ("1", "n:uint32=3x", "header value for uint32: not a"),
                                        ("1", "n:int8=300", "header value for int8: 300 is out"),
                                        ("1", "n:bool=yes", "header value for bool: not true")):
        page.type("#send-partition-value", partition)
        page.type("#send-headers", headers)
        page.one("#send-submit").click()
        page.wait(lambda: refusal in page.text("#send-form .form-status"), refusal)
    page.type("#send-headers", "n:int8=-128\nok:bool=true")
    page.one("#send-submit").click()
    page.wait(lambda: rest.call("GET", f"/streams/{sid}/topics/{tid}")["messages_count"] == 1,
              "the valid message stored")
    polled = rest.call("GET", f"/streams/{sid}/topics/{tid}/messages?partition_id=1&count=10")
    assert [m["payload"] for m in polled["messages"]] == [b64("typed")]
    values = {base64.b64decode(h["key"]["value"]).decode(): base64.b64decode(h["value"]["value"])
              for h in polled["messages"][0]["user_headers"]}
    assert values == {"n": b"\x80", "ok": b"\x01"}


def test_overview_chart_follows_traffic(page, rest):
    sid, tid = make_topic(rest, "overview-s", "overview-t")
    page.sign_in()
    page.wait(lambda: "messages/s in" in page.text("#throughput-now"), "first throughput sample")
    stats = rest.call("GET", "/stats")
    assert stats["iggy_server_version"] in page.text("#stats")

    def rate_in() -> float:
        legend = page.text("#throughput-now")
        part = legend.split("messages/s in:")[1].split()[0]
        return float(part[:-1]) * 1000 if part.endswith("k") else float(part)

    def traffic_seen() -> bool:
        send(rest, sid, tid, [f"m{i}" for i in range(20)])
        return rate_in() > 0

    page.wait(traffic_seen, "a non-zero messages/s in the live chart", timeout=60)
    samples = int(page.one("#throughput").get_attribute("data-samples"))

    def more_samples() -> bool:  # a few more points of traffic, for the screenshot
        send(rest, sid, tid, [f"m{i}" for i in range(20)])
        return int(page.one("#throughput").get_attribute("data-samples")) >= samples + 5

    page.wait(more_samples, "five more chart samples", timeout=90)
    page.screenshot(artifact("overview.png"))


def test_personal_access_token_sign_in_shows_token_once(page):
    page.sign_in()
    page.go("#/tokens")
    page.type("#create-token input[name=name]", "console-test")
    page.one("#create-token button[type=submit]").click()
    token = page.text("#new-token")
    assert len(token) > 20
    page.wait(lambda: "console-test" in page.text("#tokens-table"), "token listed")
    assert token not in page.text("#tokens-table")
    page.go("#/streams")
    page.one("#streams-table")
    page.go("#/tokens")
    page.one("#tokens-table")
    assert not page.css("#new-token"), "the token must be shown only once"
    page.one("#sign-out").click()
    page.one("#login-toggle").click()
    page.type("#login-token", token)
    page.one("#login-submit").click()
    page.wait(lambda: page.css("#username") and page.css("#username")[0].text == "iggy",
              "signed in with the token")


def test_token_expiry_is_taken_in_seconds(page, rest):
    """The token form asks for its expiry in seconds but sent the number as the API's
    microseconds: a token meant to last an hour (3600) expired 3.6 ms after it was made."""
    page.sign_in()
    page.go("#/tokens")
    page.type("#create-token input[name=name]", "hourly")
    page.type("#create-token input[name=expiry]", "3600")
    before_us = time.time_ns() // 1000
    page.one("#create-token button[type=submit]").click()
    page.wait(lambda: "hourly" in page.text("#tokens-table"), "token listed")
    expiry_at = next(t["expiry_at"] for t in rest.call("GET", "/personal-access-tokens")
                     if t["name"] == "hourly")
    assert 3_500_000_000 < expiry_at - before_us < 3_700_000_000, expiry_at - before_us


def test_token_with_a_slash_in_its_name_is_deleted_from_the_page(page, rest):
    """A token named "ci/deploy" was created from the page but its Delete answered 404
    ("HTTP 404"): the server decoded %2F before routing."""
    page.sign_in()
    page.go("#/tokens")
    page.type("#create-token input[name=name]", "ci/deploy")
    page.one("#create-token button[type=submit]").click()
    page.wait(lambda: "ci/deploy" in page.text("#tokens-table"), "token listed")
    row_button(page, "#tokens-table", "ci/deploy", "delete", name_cell=0).click()
    page.confirm()
    page.wait(lambda: all(t["name"] != "ci/deploy"
                          for t in rest.call("GET", "/personal-access-tokens")), "token deleted")


def test_consumer_group_lag(page, rest, loop, console_server):
    sid, tid = make_topic(rest, "lag-s", "lag-t", partitions=2)
    send(rest, sid, tid, [f"p0-{i}" for i in range(10)], partition=0)
    send(rest, sid, tid, [f"p1-{i}" for i in range(5)], partition=1)
    member = Client(console_server.tcp_address, username="iggy", password="iggy")

    async def join_and_store() -> None:
        await member.connect()
        await member.create_consumer_group("lag-s", "lag-t", "lag-g")
        await member.join_consumer_group("lag-s", "lag-t", "lag-g")
        await member.store_consumer_offset("lag-g", "lag-s", "lag-t", 3, partition_id=0,
                                           group=True)

    loop.run(join_and_store())
    try:
        page.sign_in()
        page.go(f"#/streams/{sid}/topics/{tid}/groups")
        lag = {el.get_attribute("data-partition"): el.text
               for el in page.wait(lambda: page.css(".lag-table .lag"), "lag cells")}
        # partition 0: current offset 9, stored 3 -> 6; partition 1: nothing stored, 5 waiting
        assert lag == {"0": "6", "1": "5"}
        assert "Members (1)" in page.text(".group")
        page.screenshot(artifact("consumer-groups.png"))
    finally:
        loop.run(member.close())


def test_lag_of_many_groups_over_a_thousand_partitions(page, rest):
    """The lag page asks one stored offset per group and partition, and asked them all at
    once: 3,000 fetches for 3 groups over 1,000 partitions, which Chromium failed ("Failed to
    fetch" as the whole page). Requests now go out at most 6 at a time, and those still
    waiting when the page is left are dropped: the next page does not queue behind them."""
    sid, tid = make_topic(rest, "wide-s", "wide-t", partitions=1000)
    for group in ("wide-g1", "wide-g2", "wide-g3"):
        rest.call("POST", f"/streams/{sid}/topics/{tid}/consumer-groups", {"name": group}, ok=201)
    page.sign_in()
    page.script("performance.setResourceTimingBufferSize(100000)")
    lag_requests = ("return performance.getEntriesByType('resource')"
                    ".filter(e => e.name.includes('/consumer-offsets?')).length")
    page.go(f"#/streams/{sid}/topics/{tid}/groups")
    page.wait(lambda: page.script(lag_requests) >= 30, "the lag page's requests under way")
    sent = page.script(lag_requests.replace("return ", "location.hash = '#/streams'; return ", 1))
    page.one("#streams-table")
    assert page.script(lag_requests) <= sent + 12, "the left page's queued requests were sent"

    page.go(f"#/streams/{sid}/topics/{tid}/groups")
    page.wait(lambda: page.css(".lag-table, #page-error"), "lag tables or an error", timeout=180)
    assert not page.css("#page-error"), page.text("#page-error")
    rows = page.script("return [...document.querySelectorAll('.lag-table tbody')].map("
                       "b => b.rows.length)")
    assert rows == [1000, 1000, 1000]


def test_never_and_unlimited_are_not_the_server_default(browser, tmp_path):
    """The topic form sent its "0 = never" expiry and "0 = unlimited" size as 0, which the API
    reads as the server's default: on a server whose default expiry is 7 days, a topic
    created from the page, or one that never expired and was only renamed there, kept its
    messages 7 days."""
    server = LurcherServer()
    server.start(tmp_path / "defaults", {**HTTP_ON, "LURCHER_SYSTEM_TOPIC_MESSAGE_EXPIRY": "7 days",
                                         "LURCHER_SYSTEM_TOPIC_MAX_SIZE": "10 GB"})
    rest = Rest(f"http://{server.endpoints['http']}")
    try:
        page = Page(browser, rest.base)
        sid, kept = make_topic(rest, "defaults-s", "kept")
        forever = {"message_expiry": U64_MAX, "max_topic_size": U64_MAX}
        rest.call("PUT", f"/streams/{sid}/topics/{kept}", {
            "name": "kept", "compression_algorithm": "none", **forever}, ok=204)
        page.sign_in()
        page.go(f"#/streams/{sid}")
        page.type("#create-topic input[name=name]", "made")
        page.one("#create-topic button[type=submit]").click()
        row_button(page, "#topics-table", "kept", "edit").click()
        page.type("#edit-topic input[name=name]", "renamed")
        page.one("#edit-topic button[type=submit]").click()
        page.wait(lambda: "renamed" in page.text("#topics-table") and "made" in page.text(
            "#topics-table"), "topic made and topic renamed")
        for topic in rest.call("GET", f"/streams/{sid}/topics"):
            assert {k: topic[k] for k in forever} == forever, topic["name"]
    finally:
        rest.close()
        server.close()


def test_read_only_user_gets_no_delete_and_server_refuses(page, rest):
    sid, tid = make_topic(rest, "guarded-s", "guarded-t")
    rest.call("POST", "/users", {
        "username": "reader", "password": "reader-pass", "status": "active", "permissions": {
            "global": {"read_streams": True, "read_topics": True, "poll_messages": True},
            "streams": None}}, ok=200)
    page.sign_in("reader", "reader-pass")
    page.one("#no-stats")
    assert "Clients" not in page.text("#nav")
    page.go("#/streams")
    page.wait(lambda: "guarded-s" in page.text("#streams-table"), "stream listed to reader")
    assert not page.css("[data-action=delete]") and not page.css("[data-action=purge]")
    assert not page.css("#create-stream")
    page.go(f"#/streams/{sid}")
    page.wait(lambda: "guarded-t" in page.text("#topics-table"), "topic listed to reader")
    assert not page.css("[data-action=delete]") and not page.css("#create-topic")
    page.go(f"#/streams/{sid}/topics/{tid}/messages")
    page.one("#poll-form")
    assert not page.css("#send-form")

    status = page.d.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const token = sessionStorage.getItem('lurcher.console.token');
        fetch('/streams/' + arguments[0], {method: 'DELETE', headers: {Authorization: 'Bearer ' + token}})
          .then(r => done(r.status), e => done(String(e)));
    """, sid)
    assert status == 403
    assert any(s["name"] == "guarded-s" for s in rest.call("GET", "/streams"))


def revoke_page_token(page, rest) -> None:
    """Signs the page's session out behind its back (as an expiry or a revocation would)."""
    token = page.script("return sessionStorage.getItem('lurcher.console.token')")
    reply = rest.http.delete("/users/logout", headers={"Authorization": f"Bearer {token}"})
    assert reply.status_code == 204


def test_revoked_session_on_reload_shows_the_sign_in_form(page, rest):
    """A tab reloaded with a token that expired or was revoked read the user, got 401 and
    showed only 'Signed out: ...' where the sign-in form had just been drawn."""
    page.sign_in()
    revoke_page_token(page, rest)
    page.d.refresh()
    page.one("#login-form")
    page.sign_in()
    assert page.text("#username") == "iggy"


def test_signing_in_after_a_session_ended_returns_to_the_page(page, rest):
    """When a session ended (expired or revoked) on a page, signing in again went to the
    overview, not back to the page the operator was working on."""
    rest.call("POST", "/streams", {"name": "return-s"}, ok=200)
    sid = stream_id(rest, "return-s")
    page.sign_in()
    page.go("#/tokens")
    page.one("#create-token")
    revoke_page_token(page, rest)
    page.go(f"#/streams/{sid}")
    page.one("#login-form")
    page.type("#login-username", "iggy")
    page.type("#login-password", "iggy")
    page.one("#login-submit").click()
    page.wait(lambda: page.css("#stream-title") and page.text("#stream-title") == "return-s",
              "back on the stream's page")
    assert page.script("return location.hash") == f"#/streams/{sid}"


def page_token_expiry(page) -> int:
    token = page.script("return sessionStorage.getItem('lurcher.console.token')")
    return int(pyjwt.decode(token, options={"verify_signature": False})["exp"])


def test_console_in_use_outlives_its_token(browser, tmp_path):
    """The console never refreshed its token: an operator working in it was sent to the
    sign-in form when the token expired (after an hour by default; 4 s here), each hour."""
    server = LurcherServer()
    server.start(tmp_path / "short", {**HTTP_ON, "LURCHER_HTTP_JWT_ACCESS_TOKEN_EXPIRY": "4 s",
                                      "LURCHER_HTTP_JWT_CLOCK_SKEW": "0 s"})
    rest = Rest(f"http://{server.endpoints['http']}")
    try:
        rest.call("POST", "/streams", {"name": "outlived-s"}, ok=200)
        page = Page(browser, rest.base)
        page.sign_in()
        first_expiry = page_token_expiry(page)
        deadline = time.monotonic() + 60
        while time.time() < first_expiry + 2 and time.monotonic() < deadline:
            for route, element in (("#/tokens", "#create-token"), ("#/streams", "#streams-table")):
                page.go(route)
                page.one(element)
            time.sleep(0.3)
        page.go("#/streams")
        page.wait(lambda: "outlived-s" in page.text("#main"), "streams page, still signed in")
        assert not page.css("#login-form")
        assert page_token_expiry(page) > first_expiry
    finally:
        rest.close()
        server.close()


def test_pages_follow_permissions_changed_while_open(page, rest):
    """The console read the user's permissions once, at sign-in: after an administrator took
    manage_streams away, every page went on offering create, purge and delete (each refused
    by the server), and a permission given later was not offered until a reload."""
    rest.call("POST", "/streams", {"name": "shrink-s"}, ok=200)
    rest.call("POST", "/users", {"username": "shrinking", "password": "shrinking-pass",
                                 "status": "active",
                                 "permissions": {"global": {"manage_streams": True,
                                                            "read_streams": True}}}, ok=200)
    uid = next(u["id"] for u in rest.call("GET", "/users") if u["username"] == "shrinking")
    page.sign_in("shrinking", "shrinking-pass")
    page.go("#/streams")
    page.one("#create-stream")
    assert page.css("[data-action=delete]") and "Clients" not in page.text("#nav")

    rest.call("PUT", f"/users/{uid}/permissions", {"permissions": {
        "global": {"read_streams": True, "read_servers": True}, "streams": None}}, ok=204)
    page.go("#/tokens")
    page.one("#create-token")
    page.go("#/streams")
    page.wait(lambda: "shrink-s" in page.text("#streams-table"), "streams listed again")
    assert not page.css("#create-stream") and not page.css("[data-action=delete]")
    assert "Clients" in page.text("#nav")


def test_server_out_of_reach_is_said_so(page):
    """With no answer from the server (down, or the network gone) pages, forms and the
    overview showed the browser's bare "Failed to fetch"; now they say what happened."""
    page.sign_in()
    page.d.execute_cdp_cmd("Network.enable", {})
    page.d.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    try:
        page.go("#/streams")
        assert page.text("#page-error").startswith("Cannot reach the server: no answer")
    finally:
        page.d.execute_cdp_cmd("Network.emulateNetworkConditions", {
            "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    page.go("#/tokens")
    page.one("#tokens-table")


def test_html_in_names_and_payloads_renders_as_text(page, rest):
    page.sign_in()
    page.go("#/streams")
    page.type("#stream-name", XSS)
    page.one("#create-stream button[type=submit]").click()
    page.wait(lambda: XSS in page.text("#streams-table"), "stream name shown as text")
    sid = stream_id(rest, XSS)
    created = rest.call("POST", f"/streams/{sid}/topics", {"name": XSS, "partitions_count": 1,
                                                          **TOPIC_SETTINGS}, ok=200)
    tid = created["id"]
    page.go(f"#/streams/{sid}")
    page.wait(lambda: XSS in page.text("#topics-table") and XSS in page.text("#stream-title"),
              "topic name as text")
    page.go(f"#/streams/{sid}/topics/{tid}/messages")
    page.one("#tail-toggle").click()
    page.wait(lambda: page.text("#tail-state").startswith("following"), "tail running")
    rest.call("POST", f"/streams/{sid}/topics/{tid}/messages", {
        "partitioning": {"kind": "balanced", "value": ""},
        "messages": [{"payload": b64(XSS), "user_headers": [
            {"key": {"kind": "string", "value": b64(XSS)},
             "value": {"kind": "string", "value": b64(XSS)}}]}]}, ok=201)
    for view in ("json", "text"):
        page.choose("#poll-form select[name=view]", view)
        page.one("#poll-submit").click()
        page.wait(lambda: XSS in page.text("#messages"), f"payload as text ({view})")
    page.wait(lambda: XSS in page.text("#tail"), "payload as text in the tail")
    assert f"{XSS} (string) = {XSS}" in page.text("#messages")
    assert page.script("return document.querySelectorAll('#main img, #main script').length") == 0
    assert page.script("return window.__xss") is None


LEFT_OF = """
    const [root, word] = arguments;
    const walk = document.createTreeWalker(document.querySelector(root), NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      const i = n.data.indexOf(word);
      if (i < 0) continue;
      const range = document.createRange();
      range.setStart(n, i);
      range.setEnd(n, i + word.length);
      return range.getBoundingClientRect().left;
    }
    return null;
"""


def test_bidi_controls_in_names_do_not_reorder_the_page(page, rest):
    """A stream name ending in a stray isolate end and a right-to-left override (U+2069
    U+202E) turned the delete question into 'Delete stream "bidi-s?scipot sti lla dna"', and a
    topic name with U+202E reversed the crumbs after it; <bdi> alone does not hold the
    first. Now the controls are shown as visible marks and the words keep their order."""
    sid, tid = make_topic(rest, "bidi-s\u2069\u202e", "bidi-t\u202eX")
    page.sign_in()
    page.go("#/streams")
    page.wait(lambda: "bidi-s[U+2069][U+202E]" in page.text("#streams-table"), "marks shown")
    row_button(page, "#streams-table", "bidi-s[U+2069][U+202E]", "delete").click()
    page.one("dialog[open]")
    lefts = [page.script(LEFT_OF, "dialog[open] p", w) for w in ("Delete", "and", "all", "topics")]
    assert lefts == sorted(lefts), f"words of the question out of order: {lefts}"
    page.one("dialog[open] [data-role=cancel]").click()
    page.go(f"#/streams/{sid}/topics/{tid}/messages")
    page.one("#poll-form")
    topic_end = page.script(
        "return document.querySelectorAll('.crumbs a')[2].getBoundingClientRect().right")
    assert page.script(LEFT_OF, ".crumbs", "messages") > topic_end, "crumbs reordered"
    assert "\u202e" not in page.script("return document.getElementById('main').textContent")


def test_invisible_characters_in_names_are_shown(page, rest):
    """A stream named "zw-orders" + U+200B (zero-width space) looked exactly like the
    stream "zw-orders" beside it, and so did names with a word joiner or a byte order mark.
    Now each invisible character is shown as a mark; the joiners of emoji are kept."""
    for name in ("zw-orders", "zw-orders\u200b", "zw\u2060-\ufefforders",
                 "zw-\U0001F469\u200d\U0001F52C"):
        rest.call("POST", "/streams", {"name": name}, ok=200)
    page.sign_in()
    page.go("#/streams")
    page.wait(lambda: "zw-orders[U+200B]" in page.text("#streams-table"), "marks shown")
    names = [a.text for a in page.css("#streams-table a") if a.text.startswith("zw")]
    assert sorted(names) == ["zw-orders", "zw-orders[U+200B]", "zw-\U0001F469\u200d\U0001F52C",
                             "zw[U+2060]-[U+FEFF]orders"]


def test_long_names_wrap_inside_the_page(page, rest):
    """A 255-character name (no spaces) kept its table cell on one line, which pushed the
    row's Rename, Purge and Delete buttons 1,300 px past the window's right edge, and the
    topics page's heading and crumbs widened the page to 3,600 px."""
    sid = make_topic(rest, "W" * 255, "V" * 255)[0]
    page.sign_in()
    page.go("#/streams")
    delete = row_button(page, "#streams-table", "W" * 255, "delete")
    assert page.script("return arguments[0].getBoundingClientRect().right <= window.innerWidth",
                       delete)
    page.go(f"#/streams/{sid}")
    page.wait(lambda: "V" * 255 in page.text("#topics-table"), "topic listed")
    assert page.script("return document.documentElement.scrollWidth <= window.innerWidth")


def test_first_load_weight(page):
    page.d.execute_cdp_cmd("Network.enable", {})
    page.d.execute_cdp_cmd("Network.clearBrowserCache", {})
    page.open()
    page.one("#login-form")
    entries = page.script("""
        const nav = performance.getEntriesByType('navigation')[0];
        const res = performance.getEntriesByType('resource');
        return [nav, ...res].map(e => ({name: e.name, transfer: e.transferSize, body: e.encodedBodySize}));
    """)
    total = sum(e["transfer"] for e in entries)
    artifact("page-weight.json").write_text(json.dumps({"total_transfer_bytes": total,
                                                        "entries": entries}, indent=1))
    print(f"first load of /ui: {total} bytes transferred in {len(entries)} requests")
    assert all(e["transfer"] > 0 for e in entries), "a resource came from cache: not a first load"
    assert total < WEIGHT_LIMIT


def test_message_browser_renders_1000_messages(page, rest):
    sid, tid = make_topic(rest, "bulk-s", "bulk-t")
    body = json.dumps({"user": "someone", "action": "click", "tags": ["a", "b", "c"], "n": 0})
    for start in range(0, 1000, 250):
        send(rest, sid, tid, [body.replace('"n": 0', f'"n": {i}') for i in range(start, start + 250)])
    page.sign_in()
    page.go(f"#/streams/{sid}/topics/{tid}/messages")
    page.type("#poll-count", "1000")
    page.one("#poll-submit").click()
    status = page.wait(lambda: (page.css("#poll-status[data-render-ms]") or [None])[0],
                       "render time", timeout=120)
    rendered = len(page.css("#messages article"))
    ms = float(status.get_attribute("data-render-ms"))
    artifact("render-1000.json").write_text(json.dumps({"messages": rendered, "render_ms": ms}))
    print(f"message browser: {rendered} messages rendered in {ms:.1f} ms")
    assert rendered == 1000
    assert '"n": 999' in page.css("#messages article")[-1].text


def test_message_browser_pages_through_a_partition(page, rest):
    """The browser polled one page and offered no way on: the next page of a partition of
    millions of offsets had to be found and typed by hand."""
    sid, tid = make_topic(rest, "pages-s", "pages-t")
    send(rest, sid, tid, [f"m{i}" for i in range(120)])
    page.sign_in()
    page.go(f"#/streams/{sid}/topics/{tid}/messages")
    page.one("#poll-submit").click()

    def first_offset() -> tuple[str, int] | None:
        articles = page.css("#messages article")
        return (articles[0].get_attribute("data-offset"), len(articles)) if articles else None

    page.wait(lambda: first_offset() == ("0", 50), "first page")
    assert not page.css("#poll-previous")
    for expected in (("50", 50), ("100", 20)):
        page.one("#poll-next").click()
        page.wait(lambda: first_offset() == expected, f"page from {expected[0]}")
    page.one("#poll-previous").click()
    page.wait(lambda: first_offset() == ("50", 50), "back a page")


def test_huge_payloads_do_not_freeze_the_page(page, rest, loop, console_server):
    """One 4 MiB message of short lines, and 1,000 messages of 16,000 line breaks each (a
    16 MB poll): the first took minutes to lay out at 60 MiB and the second 87 s here, with
    the page frozen. Now a payload shows its first 16 KiB and says how large it is, and
    messages outside the view are not laid out."""
    sid, tid = make_topic(rest, "huge-s", "huge-t", partitions=2)
    big = 4 * 2**20

    async def produce() -> None:
        async with Client(console_server.tcp_address, username="iggy", password="iggy") as c:
            await c.send_messages("huge-s", "huge-t", [b"y\n" * (big // 2)], 0)
            for _ in range(4):
                await c.send_messages("huge-s", "huge-t", [b"\n" * 16000] * 250, 1)

    loop.run(produce())
    page.sign_in()
    page.go(f"#/streams/{sid}/topics/{tid}/messages")

    def render(partition: str, count: int) -> float:
        page.script("document.getElementById('poll-status').removeAttribute('data-render-ms')")
        page.choose("#poll-form select[name=partition]", partition)
        page.type("#poll-count", str(count))
        page.one("#poll-submit").click()
        status = page.wait(lambda: (page.css("#poll-status[data-render-ms]") or [None])[0],
                           "render time", timeout=120)
        return float(status.get_attribute("data-render-ms"))

    page.choose("#poll-form select[name=view]", "text")
    render("0", 1)
    shown = page.script("return document.querySelector('#messages .payload').textContent")
    assert shown.endswith(f"({big} bytes, the first 16384 shown)") and len(shown) < 17000
    ms = render("1", 1000)
    print(f"1,000 payloads of 16,000 lines rendered in {ms:.1f} ms")
    assert len(page.css("#messages article")) == 1000
    assert ms < 10_000


def test_many_headers_show_the_first_fifty(page, rest):
    """A header block holds up to about 7,000 headers: a poll of 167 such messages built 1.2
    million lines (4.7 s frozen). Now a message shows its first 50 headers and a count."""
    sid, tid = make_topic(rest, "headers-s", "headers-t")
    headers = [{"key": {"kind": "string", "value": b64(f"k{i}")},
                "value": {"kind": "uint32", "value": b64_u32(i)}} for i in range(500)]
    rest.call("POST", f"/streams/{sid}/topics/{tid}/messages", {
        "partitioning": {"kind": "balanced", "value": ""},
        "messages": [{"payload": b64("p"), "user_headers": headers}] * 3}, ok=201)
    page.sign_in()
    page.go(f"#/streams/{sid}/topics/{tid}/messages")
    page.one("#poll-submit").click()
    page.wait(lambda: len(page.css("#messages article")) == 3, "polled messages")
    lines = page.script("return [...document.querySelectorAll('#messages article')].map("
                        "a => [...a.querySelectorAll('.headers li')].map(li => li.textContent))")
    for shown in lines:
        assert shown[:2] == ["k0 (uint32) = 0", "k1 (uint32) = 1"] and len(shown) == 51
        assert shown[-1] == "… 450 more headers (500 in all)"


def test_json_view_shows_numbers_as_written(page, rest):
    """The JSON view parsed payloads to doubles and printed them again, so a stored
    12345678901234567890 showed as 12345678901234567000 and 1.50 as 1.5."""
    sid, tid = make_topic(rest, "numbers-s", "numbers-t")
    send(rest, sid, tid, ['{"amount": 12345678901234567890, "near": 9007199254740993, '
                          '"price": 1.50, "scaled": 1e2, "list": [-0, 0.1]}'])
    page.sign_in()
    page.go(f"#/streams/{sid}/topics/{tid}/messages")
    page.one("#poll-submit").click()
    page.wait(lambda: page.css("#messages .payload"), "polled message")
    shown = json.loads(page.text("#messages .payload"), parse_float=str, parse_int=str)
    assert shown == {"amount": "12345678901234567890", "near": "9007199254740993",
                     "price": "1.50", "scaled": "1e2", "list": ["-0", "0.1"]}


def row_button(page, table: str, name: str, action: str, name_cell: int = 1):
    """The ``action`` button in the row of ``table`` whose name cell is ``name``."""
    def find():
        for row in page.css(f"{table} tbody tr"):
            cells = row.find_elements("css selector", "td")
            if len(cells) > 1 and cells[name_cell].text == name:
                found = row.find_elements("css selector", f"[data-action={action}]")
                return found[0] if found else None
        return None
    return page.wait(find, f"{action} button of {name}")


def test_edit_purge_delete_ask_for_confirmation(page, rest):
    sid, tid = make_topic(rest, "manage-s", "manage-t")
    send(rest, sid, tid, ["one", "two", "three"])
    topic_path = f"/streams/{sid}/topics/{tid}"
    page.sign_in()
    page.go(f"#/streams/{sid}")
    row_button(page, "#topics-table", "manage-t", "edit").click()
    page.type("#edit-topic input[name=name]", "manage-renamed")
    page.type("#edit-topic input[name=expiry]", "60")
    page.one("#edit-topic button[type=submit]").click()
    page.wait(lambda: "manage-renamed" in page.text("#topics-table"), "renamed topic")
    edited = rest.call("GET", topic_path)
    assert edited["name"] == "manage-renamed" and edited["message_expiry"] == 60_000_000

    row_button(page, "#topics-table", "manage-renamed", "purge").click()
    page.one("dialog[open] [data-role=cancel]").click()
    assert rest.call("GET", topic_path)["messages_count"] == 3
    row_button(page, "#topics-table", "manage-renamed", "purge").click()
    page.confirm()
    page.wait(lambda: rest.call("GET", topic_path)["messages_count"] == 0, "purged")

    row_button(page, "#topics-table", "manage-renamed", "delete").click()
    page.confirm()
    page.wait(lambda: rest.http.get(topic_path).status_code == 404, "topic deleted")
    page.go("#/streams")
    row_button(page, "#streams-table", "manage-s", "delete").click()
    page.confirm()
    page.wait(lambda: rest.http.get(f"/streams/{sid}").status_code == 404, "stream deleted")
    page.wait(lambda: "manage-s" not in page.text("#streams-table"), "list refreshed")


def test_users_created_and_permissions_edited_from_the_page(page, rest):
    rest.call("POST", "/streams", {"name": "perm-s"}, ok=200)
    sid = stream_id(rest, "perm-s")
    page.sign_in()
    page.go("#/users")
    page.type("#create-user input[name=username]", "operator")
    page.type("#create-user input[name=password]", "operator-pass")
    page.one("#create-user input[name=read_streams]").click()
    page.one("#create-user button[type=submit]").click()
    row_button(page, "#users-table", "operator", "permissions").click()
    page.one("#permissions-form input[name=manage_streams]").click()
    page.one("#permissions-form textarea[name=streams]").clear()
    page.type("#permissions-form textarea[name=streams]", f'{{"{sid}": {{"read_stream": true}}}}')
    page.one("#permissions-form button[type=submit]").click()
    uid = next(u["id"] for u in rest.call("GET", "/users") if u["username"] == "operator")
    page.wait(lambda: rest.call("GET", f"/users/{uid}")["permissions"]["global"]["manage_streams"],
              "permissions saved")
    saved = rest.call("GET", f"/users/{uid}")["permissions"]
    assert saved["global"]["read_streams"] and not saved["global"]["manage_users"]
    assert saved["streams"][str(sid)]["read_stream"] is True


def test_tail_follows_every_partition_once(page, rest):
    sid, tid = make_topic(rest, "tail-s", "tail-t", partitions=3)
    send(rest, sid, tid, ["before"], partition=1)
    page.sign_in()
    page.go(f"#/streams/{sid}/topics/{tid}/messages")
    page.one("#tail-toggle").click()
    page.wait(lambda: page.text("#tail-state") == "following all partitions", "tail running")
    for partition in (2, 0, 1):
        send(rest, sid, tid, [f"to-{partition}-a", f"to-{partition}-b"], partition=partition)
    page.wait(lambda: len(page.css("#tail article")) >= 6, "six tailed messages")
    page.wait(lambda: page.text("#tail-state") == "following all partitions", "a settled round")
    seen = sorted((a.get_attribute("data-partition"), a.find_element("css selector", ".payload").text)
                  for a in page.css("#tail article"))
    assert seen == sorted((str(p), f"to-{p}-{x}") for p in (0, 1, 2) for x in "ab")


def test_tail_goes_on_after_a_purge(page, rest):
    """Offsets start again at 0 after a purge; the tail waited for the offset after the last
    one it had shown (3 here) and showed nothing sent after the purge."""
    sid, tid = make_topic(rest, "purged-s", "purged-t")
    page.sign_in()
    page.go(f"#/streams/{sid}/topics/{tid}/messages")
    page.one("#tail-toggle").click()
    page.wait(lambda: page.text("#tail-state") == "following all partitions", "tail running")
    send(rest, sid, tid, ["before-0", "before-1", "before-2"])
    page.wait(lambda: len(page.css("#tail article")) == 3, "three tailed messages")
    rest.call("DELETE", f"/streams/{sid}/topics/{tid}/purge", ok=204)
    send(rest, sid, tid, ["after-purge"])
    page.wait(lambda: "after-purge" in page.text("#tail"), "the message sent after the purge")
    assert page.css("#tail article")[-1].get_attribute("data-offset") == "0"


def test_consumer_offsets_and_clients_pages(page, rest, loop, console_server):
    sid, tid = make_topic(rest, "offs-s", "offs-t")
    send(rest, sid, tid, [f"m{i}" for i in range(5)])

    async def connect_official() -> None:
        await connect_client(console_server)

    loop.run(connect_official())
    page.sign_in()
    page.go(f"#/streams/{sid}/topics/{tid}/offsets")
    page.type("#store-offset input[name=consumer]", "worker-7")
    page.type("#store-offset input[name=offset]", "2")
    page.one("#store-offset button[type=submit]").click()
    page.wait(lambda: "2" in [c.text for c in page.css("#offsets td")], "stored offset listed")
    got = rest.call("GET", f"/streams/{sid}/topics/{tid}/consumer-offsets"
                    "?consumer_id=worker-7&partition_id=0", ok=200)
    assert got["stored_offset"] == 2
    page.go("#/clients")
    table = page.text("#clients-table")
    assert "tcp" in table and "http" in table and "iggy" in table
