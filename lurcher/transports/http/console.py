"""The web console: static single-page app files under ``/ui`` (``http.web_ui``).

Owns serving the files in the package's ``ui/`` directory and the security headers they
carry. The console is plain HTML, CSS and ES modules (no build step, no third-party assets);
it talks to the REST API with the same JWT bearer tokens and permissions as any client, so
nothing here touches shard state.

Invariants: the set of servable files is read once, at start-up, from ``ui/`` (names only
from that listing are served, so no request path reaches the file system); every console
response carries ``SECURITY_HEADERS`` (CSP with ``script-src 'self'`` and no inline script,
no framing, no MIME sniffing, no referrer); ``/ui`` and ``/ui/`` are the page, any other
name is 404.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

UI_DIR = Path(__file__).with_name("ui")
PREFIX = "/ui"
INDEX = "index.html"
MEDIA_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
               ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cross-origin-opener-policy": "same-origin",
    "cache-control": "no-cache",
}


def load_assets(root: Path = UI_DIR) -> dict[str, tuple[bytes, str]]:
    """Relative path -> (content, media type) for every servable file under ``root``."""
    assets = {}
    for path in sorted(root.rglob("*")):
        media = MEDIA_TYPES.get(path.suffix)
        if path.is_file() and media is not None:
            assets[path.relative_to(root).as_posix()] = (path.read_bytes(), media)
    return assets


class Console:
    """The ``/ui`` routes over an in-memory copy of the console files."""

    def __init__(self, assets: dict[str, tuple[bytes, str]] | None = None) -> None:
        self.assets = load_assets() if assets is None else assets

    def answer(self, name: str) -> Response:
        found = self.assets.get(name)
        if found is None:
            return Response("not found", status_code=404, media_type="text/plain",
                            headers=SECURITY_HEADERS)
        content, media = found
        return Response(content, media_type=media, headers=SECURITY_HEADERS)

    async def page(self, request: Request) -> Response:
        return self.answer(INDEX)

    async def asset(self, request: Request) -> Response:
        return self.answer(request.path_params["name"])

    def routes(self) -> list[BaseRoute]:
        return [Route(PREFIX, self.page, methods=["GET", "HEAD"]),
                Route(f"{PREFIX}/", self.page, methods=["GET", "HEAD"]),
                Route(PREFIX + "/{name:path}", self.asset, methods=["GET", "HEAD"])]


__all__ = ["Console", "SECURITY_HEADERS", "load_assets"]
