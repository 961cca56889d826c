"""The paths open without a proxy key are the ones the README lists (issue 47): every GET
route of the app is asked without a key, with ``server.api_keys`` set; those that answer
anything but 401 are the open ones. Loopback only."""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp

from adapters.ui import OPEN_PATHS as UI_PATHS
from middleware.commands.serve import start_site
from middleware.composition import build_app
from middleware.settings import load_settings
from tests.support.checkers import ScriptedChecker

README = Path(__file__).resolve().parents[3] / "README.md"


def readme_open_paths() -> set[str]:
    """The first column of the README's table of open paths."""
    section = README.read_text(encoding="utf-8").split("except these open paths:", 1)[1].lstrip().split("\n\n", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \|", section, re.M))


async def test_the_readme_lists_exactly_the_paths_open_without_a_key() -> None:
    settings = load_settings(**{"check.checker": "none", "server.api_keys": ["pk-open-paths-test-1234"]})
    app = build_app(settings, checker=ScriptedChecker())
    runner, port = await start_site(app, "127.0.0.1", 0)
    paths = {info.get("path") or info["formatter"] for resource in app.router.resources()
             if any(route.method == "GET" for route in resource) for info in [resource.get_info()]}
    probe = {path.replace("{name}", sorted(UI_PATHS - {"/"})[0].removeprefix("/ui/")): path for path in paths}
    open_paths = set()
    try:
        async with aiohttp.ClientSession() as session:
            for url_path, path in probe.items():
                async with session.get(f"http://127.0.0.1:{port}{url_path}") as response:
                    if response.status != 401:
                        open_paths.add(path.replace("{name}", "*"))
    finally:
        await runner.cleanup()
    assert "/v1/models" in paths and "/v1/models" not in open_paths  # the probe tells a closed path
    assert open_paths == readme_open_paths() == {"/", "/ui/*", "/healthz", "/metrics", "/openapi.json"}
