"""docker-compose.yml as a real compose implementation reads it (podman-compose's ``config``:
interpolation, anchors, profiles), and each service's environment, as resolved there, through
the real settings loader: every ``FACTCHECK_*`` variable must name a setting and arrive in it.

podman-compose comes from ``.ci/image.sh``, which installs it and prints its path for
FACTCHECK_TEST_PODMAN_COMPOSE (``.ci/run`` exports it); without that variable these tests skip
(Debian 12's podman-compose 1.0.3 has no ``config``). tests/test_compose_scale.py reads the
file without a compose implementation."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import SecretStr

from middleware.settings import _FLAT_ENV_ALIASES, Settings, load_settings

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
PROFILES = ("scale", "searxng")

# What a user sets on the host (docker-compose.yml's header and README); {} is the default stack.
SCENARIOS: dict[str, dict[str, str]] = {
    "defaults": {},
    "real-llm": {"FACTCHECK_DEMO": "--no-demo-upstream", "FACTCHECK_UPSTREAM_URL": "https://api.example.com/v1",
                 "FACTCHECK_UPSTREAM_API_KEY": "sk-example", "FACTCHECK_MODE": "correct"},
    "searxng": {"FACTCHECK_EVIDENCE__PROVIDERS": '["index","searxng"]'},
    "gpu": {"FACTCHECK_VARIANT": "gpu"},
    "scale-tuned": {"FACTCHECK_SERVER__RATE_LIMIT_PER_MINUTE": "120", "FACTCHECK_RUNTIME__RAY_REPLICAS": "3",
                    "FACTCHECK_RUNTIME__MAX_BATCH": "16"},
}


def podman_compose() -> str:
    named = os.environ.get("FACTCHECK_TEST_PODMAN_COMPOSE")
    if not named:
        pytest.skip("no compose implementation: set FACTCHECK_TEST_PODMAN_COMPOSE (bash .ci/image.sh prints it)")
    if not os.access(named, os.X_OK):
        pytest.fail(f"FACTCHECK_TEST_PODMAN_COMPOSE={named} is not an executable")
    return named


_resolved: dict[str, dict[str, Any]] = {}


def resolved(scenario: str) -> dict[str, Any]:
    """``podman-compose config`` with every profile, the scenario's variables and no others."""
    if scenario not in _resolved:
        args = [podman_compose(), "-f", str(ROOT / "docker-compose.yml")]
        for profile in PROFILES:
            args += ["--profile", profile]
        env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **SCENARIOS[scenario]}
        done = subprocess.run(args + ["config"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        _resolved[scenario] = yaml.safe_load(done.stdout)
    return _resolved[scenario]


def service_environment(scenario: str, service: str) -> dict[str, str]:
    """The variables the service's container gets: an entry without a value passes the
    host's variable through when the host has it (compose does that at `up`)."""
    environment = resolved(scenario)["services"][service].get("environment") or {}
    out = {}
    for name, value in environment.items():
        value = SCENARIOS[scenario].get(name) if value is None else value
        if value is not None:
            out[name] = str(value)
    return out


def service_settings(scenario: str, service: str, monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name in list(os.environ):
        if name.startswith("FACTCHECK_"):
            monkeypatch.delenv(name)
    for name, value in service_environment(scenario, service).items():
        monkeypatch.setenv(name, value)
    return load_settings()


def setting_path(variable: str) -> tuple[str, str]:
    """The (section, field) a FACTCHECK_* variable sets; fails on a name the loader ignores."""
    if variable in _FLAT_ENV_ALIASES:
        section, field = _FLAT_ENV_ALIASES[variable]
    else:
        section, _, field = variable.removeprefix("FACTCHECK_").lower().partition("__")
    assert section in Settings.model_fields, f"{variable}: no settings section {section!r}"
    model = Settings.model_fields[section].annotation
    assert field in model.model_fields, f"{variable}: no setting {section}.{field} (the loader would ignore it)"
    return section, field


def arrived(loaded: Any, text: str) -> bool:
    """Does the loaded setting hold what the environment variable said?"""
    if isinstance(loaded, SecretStr):
        return loaded.get_secret_value() == text
    if isinstance(loaded, Enum):
        return loaded.value == text
    if isinstance(loaded, bool):
        return loaded == (text.lower() in ("1", "true", "yes", "on"))
    if isinstance(loaded, (int, float)):
        return loaded == float(text)
    if isinstance(loaded, (list, dict)):
        return loaded == json.loads(text)
    if isinstance(loaded, Path):
        return loaded == Path(text)
    return loaded == text


def factcheck_services(scenario: str) -> list[str]:
    services = resolved(scenario)["services"]
    return [name for name, service in services.items()
            if any(variable.startswith("FACTCHECK_") for variable in service.get("environment") or {})]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_factcheck_variable_of_every_service_arrives_in_its_setting(
    scenario: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = factcheck_services(scenario)
    assert {"proxy", "proxy-1", "proxy-2", "ray-head"} <= set(services)
    for service in services:
        settings = service_settings(scenario, service, monkeypatch)
        for variable, text in service_environment(scenario, service).items():
            if variable == "FACTCHECK_CONFIG":  # the YAML file's path, not a setting
                continue
            section, field = setting_path(variable)
            loaded = getattr(getattr(settings, section), field)
            assert arrived(loaded, text), f"{service}: {variable}={text!r} loaded as {section}.{field}={loaded!r}"


def test_the_default_stack_runs_the_image_built_from_the_dockerfile() -> None:
    config = resolved("defaults")
    proxy = config["services"]["proxy"]
    assert proxy["image"] == "factcheck-middleware:cpu" and proxy["build"]["args"] == ["VARIANT=cpu"]
    assert Path(proxy["build"]["context"]) == ROOT and "dockerfile" not in proxy["build"]
    assert proxy["command"] == ["serve", "--demo-upstream"]
    assert proxy["ports"] == ["8000:8000"] and re.search(r"^EXPOSE 8000$", DOCKERFILE, re.M)
    # the proxy's volumes are the image's: the models and the index survive a new image
    declared = json.loads(re.search(r"^VOLUME (\[.*\])$", DOCKERFILE, re.M).group(1))
    mounted = {volume.split(":")[1]: volume.split(":")[0] for volume in proxy["volumes"]}
    assert sorted(mounted) == sorted(declared)
    assert all(name in config["volumes"] for name in mounted.values())
    # the scale profile's replicas run the same image; the Ray nodes the Dockerfile's `ray` stage
    for name in ("proxy-1", "proxy-2"):
        assert config["services"][name]["image"] == proxy["image"]
        assert config["services"][name]["command"] == proxy["command"]
    stages = re.findall(r"^FROM \S+ AS (\S+)$", DOCKERFILE, re.M)
    for name in ("ray-head", "ray-worker"):
        build = config["services"][name]["build"]
        assert build["target"] in stages and "dockerfile_inline" not in build
    assert stages[-1] == "proxy"  # `docker build .` builds the proxy, not the Ray nodes


def test_a_real_llm_replaces_the_demo_one_through_the_documented_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = resolved("real-llm")["services"]["proxy"]
    assert proxy["command"] == ["serve", "--no-demo-upstream"]
    settings = service_settings("real-llm", "proxy", monkeypatch)
    assert settings.upstream.url == "https://api.example.com/v1"
    assert settings.upstream.api_key is not None and settings.upstream.api_key.get_secret_value() == "sk-example"
    assert settings.check.default_mode.value == "correct"
    # the header's command line, as documented, is this scenario
    header = (ROOT / "docker-compose.yml").read_text()
    assert "FACTCHECK_DEMO=--no-demo-upstream FACTCHECK_UPSTREAM_URL=" in header
    assert shlex.split("serve --no-demo-upstream") == proxy["command"]


def test_searxng_as_a_source_and_the_gpu_image(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = service_settings("searxng", "proxy", monkeypatch)
    assert settings.evidence.providers == ["index", "searxng"]
    searxng = resolved("searxng")["services"]["searxng"]
    assert settings.evidence.searxng_url.rstrip("/") == searxng["environment"]["SEARXNG_BASE_URL"].rstrip("/")
    gpu = resolved("gpu")["services"]["proxy"]
    assert gpu["image"] == "factcheck-middleware:gpu" and gpu["build"]["args"] == ["VARIANT=gpu"]
    assert re.search(r"^FROM \$\{CUDA_IMAGE\} AS base-gpu$", DOCKERFILE, re.M)


def test_the_scale_variables_reach_the_replicas_and_the_tier(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("proxy-1", "proxy-2"):
        assert service_settings("scale-tuned", name, monkeypatch).server.rate_limit_per_minute == 120
    head = service_settings("scale-tuned", "ray-head", monkeypatch)
    assert head.runtime.ray_replicas == 3 and head.runtime.max_batch == 16
