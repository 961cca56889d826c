"""The compose profile ``scale`` (Redis, a Ray head serving the models, a Ray worker, two proxy
replicas), checked without Docker: services and profiles, and every variable the replicas get
read through the real settings loader."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from middleware.runtime.ray_tier import _parser
from middleware.settings import Settings, load_settings

pytestmark = pytest.mark.timeout(30)

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_TEXT = (ROOT / "docker-compose.yml").read_text()
COMPOSE = yaml.safe_load(COMPOSE_TEXT)
SERVICES = COMPOSE["services"]
SCALE = ("redis", "ray-head", "ray-worker", "proxy-1", "proxy-2")
PROXIES = ("proxy-1", "proxy-2")


def interpolated(value: Any) -> str:
    """A compose value with ``${VAR:-default}`` as the default (no host variables set)."""
    return re.sub(r"\$\{[A-Z0-9_]+:-([^}]*)\}", r"\1", str(value)).replace("$$", "$")


def command_line(service: str) -> str:
    command = SERVICES[service]["command"]
    return interpolated(command if isinstance(command, str) else " ".join(command))


def proxy_settings(service: str, monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name, value in SERVICES[service]["environment"].items():
        if value is not None:  # an empty entry passes the host's variable through, when set
            monkeypatch.setenv(name, interpolated(value))
    return load_settings()


def test_the_scale_profile_adds_services_and_leaves_the_default_stack_alone() -> None:
    assert set(SCALE) <= set(SERVICES)
    assert all(SERVICES[name]["profiles"] == ["scale"] for name in SCALE)
    assert all("profiles" not in SERVICES[name] for name in ("proxy", "prometheus", "grafana"))
    ports = [port.split(":")[0] for name in PROXIES for port in SERVICES[name]["ports"]]
    assert len(ports) == len(set(ports)) == 2 and "8000" not in ports  # beside the default proxy's port


def test_every_factcheck_variable_of_the_profile_is_a_setting() -> None:
    for name in SCALE:
        for variable in SERVICES[name].get("environment") or {}:
            if not variable.startswith("FACTCHECK_") or variable in ("FACTCHECK_CONFIG", "FACTCHECK_HOST",
                                                                      "FACTCHECK_PORT", "FACTCHECK_MODE",
                                                                      "FACTCHECK_UPSTREAM_URL",
                                                                      "FACTCHECK_UPSTREAM_API_KEY"):
                continue
            section, field = variable.removeprefix("FACTCHECK_").lower().split("__")
            assert field in Settings.model_fields[section].annotation.model_fields, variable


@pytest.mark.parametrize("service", PROXIES)
def test_replicas_use_the_tier_and_share_redis(service: str, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = proxy_settings(service, monkeypatch)
    assert settings.runtime.backend == "ray" and settings.runtime.ray_startup_s >= 60
    tier = urlparse(settings.runtime.ray_serve_url)
    head = _parser().parse_args(shlex.split(command_line("ray-head").split("exec python -m middleware.runtime.ray_tier")[1]))
    assert (tier.hostname, tier.port) == ("ray-head", head.port)
    assert head.address == "auto" and head.host == "0.0.0.0" and head.block
    redis = urlparse(settings.evidence.redis_url)
    assert settings.evidence.cache == "redis" and redis.hostname == "redis" and "redis" in SERVICES
    assert settings.server.rate_limit_store == "redis"
    assert {"redis", "ray-head"} <= set(SERVICES[service]["depends_on"])
    assert SERVICES[service]["image"] == SERVICES["proxy"]["image"]  # the proxy image: no Ray in it


def test_the_ray_nodes_form_one_cluster_with_the_ray_extra() -> None:
    head, worker = command_line("ray-head"), command_line("ray-worker")
    gcs_port = re.search(r"ray start --head --port=(\d+)", head)
    assert gcs_port and "--include-dashboard=false" in head and "--disable-usage-stats" in head
    assert f"ray start --address=ray-head:{gcs_port.group(1)}" in worker and "--block" in worker
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(dep.startswith("ray[serve]==") for dep in extras["ray"])
    # the Ray nodes' image is the Dockerfile's stage `ray`: the proxy's image plus the extra
    stage = (ROOT / "Dockerfile").read_text().split("FROM runtime AS ray\n")[1].split("\nFROM ")[0]
    assert re.search(r'pip install .*"\.\[[a-z,]*\bray\b[a-z,]*\]"', stage)
    assert re.search(r"^ENTRYPOINT \[\]$", stage, re.M)  # the services' commands are whole command lines
    for name in ("ray-head", "ray-worker"):
        assert SERVICES[name]["build"]["target"] == "ray" and SERVICES[name]["image"] == SERVICES["ray-head"]["image"]
        # the worker joins with the cluster token the head writes to ~/.ray (HOME is /data)
        assert "factcheck-ray-auth:/data/.ray" in SERVICES[name]["volumes"] and "/data/.ray" in stage
    assert "factcheck-ray-auth" in COMPOSE["volumes"]


def test_dollars_are_interpolations_or_escaped() -> None:
    """Compose reads ``$NAME`` as a host variable: a literal dollar must be written ``$$``."""
    assert not re.findall(r"(?<!\$)\$(?![{$])", COMPOSE_TEXT.replace("$$", ""))
