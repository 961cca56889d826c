"""The browser UI: a static single page (index.html, style.css and native ES modules: app.js,
the entry, imports the others; no build step, no bundler) that talks to the proxy's websocket
``/v1/ws``. The proxy serves the page at ``/`` and its files at ``/ui/<name>``: every ``*.js``
in this folder and style.css, nothing else. They need no proxy key (``OPEN_PATHS``, which the
composition root hands to the app with the routes).

The page is told the largest message the proxy accepts (``data-max-message-bytes`` on its
body): the request body limit ``server.max_body_bytes``, which is also the websocket's
``max_msg_size``, so the page can refuse an oversized question with the server's own words
instead of sending it and losing the connection."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

UI_DIR = Path(__file__).resolve().parent
_HEADERS = {
    # The page loads only its own files and talks only to its own origin.
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


# The files served under /ui/: the page's modules (every .js here) and its stylesheet.
_ASSETS = {path.name: "text/javascript" for path in sorted(UI_DIR.glob("*.js"))} | {"style.css": "text/css"}
OPEN_PATHS = frozenset({"/", *(f"/ui/{name}" for name in _ASSETS)})
"""The page and its files: open without a proxy key (a browser cannot send one for them)."""


_LIMIT_SLOT = 'data-max-message-bytes=""'


async def _index(request: web.Request) -> web.Response:
    # The app's client_max_size is server.max_body_bytes (middleware.server.app.create_app).
    page = (UI_DIR / "index.html").read_text(encoding="utf-8")
    page = page.replace(_LIMIT_SLOT, f'data-max-message-bytes="{int(request.client_max_size)}"', 1)
    return web.Response(text=page, content_type="text/html", charset="utf-8", headers=_HEADERS)


async def _asset(request: web.Request) -> web.FileResponse:
    name = request.match_info["name"]
    if name not in _ASSETS:
        raise web.HTTPNotFound()
    return web.FileResponse(UI_DIR / name, headers={**_HEADERS, "Content-Type": _ASSETS[name]})


def add_ui_routes(app: web.Application) -> None:
    app.router.add_get("/", _index)
    app.router.add_get("/ui/{name}", _asset)
