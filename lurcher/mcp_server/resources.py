"""MCP resources: the stream/topic tree, a stream's and a topic's details, and the latest
messages of a partition, as JSON documents under ``lurcher://`` URIs.

    lurcher://streams                                              the tree (static)
    lurcher://streams/{stream}                                     one stream and its topics
    lurcher://streams/{stream}/topics/{topic}                      one topic and its partitions
    lurcher://streams/{stream}/topics/{topic}/partitions/{p}/messages{?count}
                                                                   the newest count messages

``{stream}`` and ``{topic}`` are ids or (percent-encoded) names of at most 255 UTF-8 bytes,
``{p}`` and ``count`` ASCII digits (``{p}`` within u32); other values are refused as invalid
parameters before anything is sent. Reads go through the same permission gate (``read``) and
size limits as the tools; the message resource never stores a consumer offset.
``ResourceError`` carries an MCP error code for the protocol answer.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import mcp_types as types

from lurcher.core.wire.buffer import U32_MAX
from lurcher.core.wire.identifier import Identifier
from lurcher.mcp_server.render import fit, plain, render_polled
from lurcher.mcp_server.tools.base import Context, consumer_of, text_problem

SCHEME = "lurcher"
TREE_URI = f"{SCHEME}://streams"
JSON = "application/json"
RESOURCE_NOT_FOUND = -32002
INVALID_PARAMS = -32602

_PATHS = [
    ("tree", re.compile(r"^/?$")),
    ("stream", re.compile(r"^/(?P<stream>[^/]+)$")),
    ("topic", re.compile(r"^/(?P<stream>[^/]+)/topics/(?P<topic>[^/]+)$")),
    ("messages", re.compile(
        r"^/(?P<stream>[^/]+)/topics/(?P<topic>[^/]+)/partitions/(?P<partition>[0-9]+)/messages$")),
]

TEMPLATES = [
    types.ResourceTemplate(
        name="stream", uri_template=f"{SCHEME}://streams/{{stream}}", mime_type=JSON,
        description="One stream (id or name) with its topics."),
    types.ResourceTemplate(
        name="topic", uri_template=f"{SCHEME}://streams/{{stream}}/topics/{{topic}}",
        mime_type=JSON,
        description="One topic with its partitions: current offsets, message counts, sizes."),
    types.ResourceTemplate(
        name="latest-messages",
        uri_template=(f"{SCHEME}://streams/{{stream}}/topics/{{topic}}/partitions/{{partition}}"
                      "/messages{?count}"),
        mime_type=JSON,
        description="The newest messages of a partition (count of them, capped by the "
                    "server's limit), payloads and headers decoded."),
]


class ResourceError(Exception):
    def __init__(self, code: int, message: str) -> None:
        self.code = code
        super().__init__(message)


def topic_uri(stream_id: int, topic_id: int) -> str:
    return f"{SCHEME}://streams/{stream_id}/topics/{topic_id}"


async def list_resources(ctx: Context) -> list[types.Resource]:
    """The tree, then one resource per topic (at most ``limits.max_listed_topics``)."""
    out = [types.Resource(name="streams", uri=TREE_URI, mime_type=JSON,
                          description="Every stream with its topics (ids, names, counts).")]
    for stream in await ctx.client.get_streams():
        details = await ctx.client.get_stream(stream.id)
        for topic in details.topics if details else []:
            if len(out) > ctx.limits.max_listed_topics:
                return out
            out.append(types.Resource(
                name=f"{stream.name}/{topic.name}", uri=topic_uri(stream.id, topic.id),
                mime_type=JSON, description=f"Topic {topic.name!r} of stream {stream.name!r}."))
    return out


async def read(ctx: Context, uri: str) -> dict[str, Any]:
    """The document at ``uri``. Raises ResourceError (unknown URI, not found) or IggyError."""
    kind, params, query = _match(uri)
    return fit(await _READERS[kind](ctx, params, query), ctx.limits.max_response_bytes)


def _match(uri: str) -> tuple[str, dict[str, str], dict[str, list[str]]]:
    parts = urlsplit(uri)
    if parts.scheme != SCHEME or parts.netloc != "streams":
        raise ResourceError(RESOURCE_NOT_FOUND, f"unknown resource {uri!r}")
    for kind, pattern in _PATHS:
        m = pattern.match(parts.path)
        if m:
            params = {k: _unescaped(k, v) for k, v in m.groupdict().items()}
            _check_params(params)
            return kind, params, parse_qs(parts.query)
    raise ResourceError(RESOURCE_NOT_FOUND, f"unknown resource {uri!r}")


def _unescaped(key: str, value: str) -> str:
    """A path parameter percent-decoded as UTF-8. Raises ResourceError (invalid params) for
    escapes that are not UTF-8 (decoded leniently they read as U+FFFD: another name than
    the one asked for)."""
    try:
        return unquote(value, errors="strict")
    except UnicodeDecodeError:
        raise ResourceError(INVALID_PARAMS, f"{key}: {value[:40]!r} has percent-escapes that "
                                            "are not UTF-8") from None


def _check_params(params: dict[str, str]) -> None:
    """Raises ResourceError (invalid params) for a name that cannot be sent, or a partition
    id outside u32."""
    for key in ("stream", "topic"):
        problem = text_problem(params[key]) if key in params else None
        if problem:
            raise ResourceError(INVALID_PARAMS, f"{key}: {problem}")
    partition = params.get("partition", "0")
    if _u32(partition) is None:
        raise ResourceError(INVALID_PARAMS,
                            f"partition {partition[:40]!r} is outside 0..{U32_MAX}")


def _u32(text: str) -> int | None:
    """``text`` as an int when it is ASCII digits of a value within u32 (the rule of numeric
    identifiers), else None."""
    parsed = Identifier.parse(text)
    return parsed.value if isinstance(parsed.value, int) else None


async def _tree(ctx: Context, p: dict[str, str], q: dict[str, list[str]]) -> dict[str, Any]:
    streams = []
    for header in await ctx.client.get_streams():
        details = await ctx.client.get_stream(header.id)
        stream = plain(header)
        stream["topics"] = [_topic_summary(t) for t in plain(details.topics)] if details else []
        streams.append(stream)
    return {"count": len(streams), "streams": streams}


def _topic_summary(topic: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "name", "partitions_count", "messages_count", "size_bytes")
    return {k: topic[k] for k in keys if k in topic}


async def _stream(ctx: Context, p: dict[str, str], q: dict[str, list[str]]) -> dict[str, Any]:
    found = await ctx.client.get_stream(p["stream"])
    if found is None:
        raise ResourceError(RESOURCE_NOT_FOUND, f"stream {p['stream']!r} not found")
    return plain(found)


async def _topic(ctx: Context, p: dict[str, str], q: dict[str, list[str]]) -> dict[str, Any]:
    found = await ctx.client.get_topic(p["stream"], p["topic"])
    if found is None:
        raise ResourceError(RESOURCE_NOT_FOUND,
                            f"topic {p['topic']!r} of stream {p['stream']!r} not found")
    return plain(found)


async def _messages(ctx: Context, p: dict[str, str], q: dict[str, list[str]]) -> dict[str, Any]:
    requested = _count(q, ctx.limits.resource_messages)
    count = min(requested, ctx.limits.max_messages)
    polled = await ctx.client.poll_messages(
        p["stream"], p["topic"], _u32(p["partition"]), "last", count, False,
        consumer=consumer_of(ctx, None))
    return render_polled(polled, ctx.limits, requested)


def _count(q: dict[str, list[str]], default: int) -> int:
    values = q.get("count")
    if not values:
        return default
    count = _u32(values[0])
    if not count:
        raise ResourceError(INVALID_PARAMS, f"count must be an integer from 1 to {U32_MAX}, "
                                            f"not {values[0][:40]!r}")
    return count


_READERS = {"tree": _tree, "stream": _stream, "topic": _topic, "messages": _messages}
