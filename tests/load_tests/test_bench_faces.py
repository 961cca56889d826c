"""The front-door benchmark's measuring loop against the proxy on loopback (in-process here;
``python -m load_tests.bench_faces`` runs each server in its own process)."""

from __future__ import annotations

import pytest

from load_tests import bench_faces
from load_tests.driver import ANSWER


async def test_every_target_is_measured_and_its_text_compared(make_proxy):
    targets = {}
    for api in bench_faces.APIS:
        proxy = await make_proxy(**{"upstream.api": api})
        upstream = proxy.settings.upstream.url
        targets[("direct", api)] = f"{upstream}/{bench_faces.PATHS[api]}"
        targets[("proxy", api)] = f"{proxy.url}/{bench_faces.PATHS[api]}"
    samples = await bench_faces.run(targets, requests=2, rounds=2)
    assert {key: len(values) for key, values in samples.items()} == {key: 4 for key in targets}
    assert all(0 < first <= whole for values in samples.values() for first, whole in values)


async def test_a_text_that_differs_from_the_upstreams_fails_the_run(make_proxy, monkeypatch):
    proxy = await make_proxy()
    asked = bench_faces.body
    monkeypatch.setattr(bench_faces, "body", lambda api: {**asked(api), "mock": {"text": ANSWER + " Extra."}})
    with pytest.raises(RuntimeError, match="differs"):
        await bench_faces.run({("proxy", "chat"): f"{proxy.url}/chat/completions"}, requests=1, rounds=1)
