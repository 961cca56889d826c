"""The UI's files over HTTP, no browser needed: the page and every one of its ES modules and
its stylesheet are served with their content type and the page's security headers, and
without the proxy key when keys are configured (a browser cannot send one for them); nothing
else under /ui/ is open. The modules' imports name only served files and form no cycle."""

from __future__ import annotations

import re

import aiohttp

from adapters.ui import UI_DIR

MODULES = sorted(path.name for path in UI_DIR.glob("*.js"))
IMPORT = re.compile(r'^import\s[^;]*?\sfrom\s+"\./([\w.]+)";', re.M)


async def get(url: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    async with aiohttp.ClientSession() as session:
        async with session.get(url, headers=headers) as response:
            return response.status, dict(response.headers), await response.read()


async def test_every_module_and_the_stylesheet_are_served_without_a_key(make_proxy):
    proxy = await make_proxy(**{"server.api_keys": ["key-a"]})
    root = proxy.url.removesuffix("/v1")
    assert len(MODULES) > 1 and "app.js" in MODULES
    status, headers, page = await get(f"{root}/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert b'<script type="module" src="/ui/app.js"></script>' in page
    for name, kind in [*((name, "text/javascript") for name in MODULES), ("style.css", "text/css")]:
        status, headers, body = await get(f"{root}/ui/{name}")
        assert status == 200, name
        assert headers["Content-Type"].split(";")[0] == kind, name
        assert body == (UI_DIR / name).read_bytes(), name
        assert "script-src 'self'" in headers["Content-Security-Policy"], name
        assert headers["X-Content-Type-Options"] == "nosniff", name
        assert headers["Referrer-Policy"] == "no-referrer", name


async def test_nothing_else_under_ui_is_open_or_served(make_proxy):
    proxy = await make_proxy(**{"server.api_keys": ["key-a"]})
    root = proxy.url.removesuffix("/v1")
    for name in ("__init__.py", "index.html", "missing.js", "app.js.map"):
        status, _, _ = await get(f"{root}/ui/{name}")
        assert status == 401, name  # not an open path: the key is asked for
        status, _, _ = await get(f"{root}/ui/{name}", Authorization="Bearer key-a")
        assert status == 404, name  # and with the key, still not served
    status, _, _ = await get(f"{root}/v1/models")
    assert status == 401


def test_modules_import_only_served_modules_without_cycles():
    graph = {name: IMPORT.findall((UI_DIR / name).read_text(encoding="utf-8")) for name in MODULES}
    for name, imports in graph.items():
        assert set(imports) <= set(MODULES), name
    reached: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, " -> ".join((*path, name))
        for dependency in graph[name]:
            visit(dependency, (*path, name))
        reached.add(name)

    visit("app.js", ())
    assert reached == set(MODULES)  # every module is used by the page
