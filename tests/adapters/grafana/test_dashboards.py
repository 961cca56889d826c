"""The deployment files: every Grafana query names a metric (and labels) the app really exports;
provisioning, Prometheus, docker-compose and the Dockerfile hold the pieces they promise.
(Docker itself is not run here: the files are parsed.)"""

from __future__ import annotations

import json
import re

import pytest
import yaml
from prometheus_client import REGISTRY
from prometheus_client.metrics import MetricWrapperBase

import middleware.metrics as metrics
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
GRAFANA = ROOT / "adapters" / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "factcheck.json"
SUFFIXES = {"histogram": ("_bucket", "_sum", "_count", "_created"), "counter": ("_total", "_created"),
            "gauge": ("",), "summary": ("", "_sum", "_count", "_created")}
METRIC = re.compile(r"\bfactcheck_[a-zA-Z0-9_]+\b")
BY = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
MATCHER = re.compile(r"\b(factcheck_[a-zA-Z0-9_]+)\{([^}]*)\}")
LABEL_IN_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
PROMQL_WORDS = {"le"}


def exported_names() -> set[str]:
    """Every sample name the process can expose, from prometheus_client's registry."""
    names: set[str] = set()
    for family in REGISTRY.collect():
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
        names.update(sample.name for sample in family.samples)
    return names


def label_names() -> dict[str, set[str]]:
    """Sample name -> label names, from the metric objects declared in middleware.metrics."""
    labels: dict[str, set[str]] = {}
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            base = value._name  # noqa: SLF001 (prometheus_client keeps no public accessor)
            for suffix in SUFFIXES[value._type]:  # noqa: SLF001
                labels[base + suffix] = set(value._labelnames)  # noqa: SLF001
    return labels


def all_panels(panels: list[dict]) -> list[dict]:
    out = []
    for panel in panels:
        out.append(panel)
        out.extend(all_panels(panel.get("panels", [])))
    return out


def queries() -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target and every templating query."""
    dashboard = json.loads(DASHBOARD.read_text())
    found = [(panel["title"], target["expr"]) for panel in all_panels(dashboard["panels"])
             for target in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        query = variable["query"]
        found.append((f"${variable['name']}", query["query"] if isinstance(query, dict) else query))
    return found


def test_metrics_module_registers_what_the_dashboard_needs():
    names = exported_names()
    for needed in ("factcheck_stage_latency_seconds_bucket", "factcheck_sentences_total", "factcheck_active_streams",
                   "factcheck_time_to_first_token_seconds_bucket", "factcheck_added_latency_seconds_bucket"):
        assert needed in names


@pytest.mark.parametrize(("where", "query"), queries())
def test_every_query_names_exported_metrics_and_labels(where, query):
    names, labels = exported_names(), label_names()
    used = set(METRIC.findall(query))
    assert used, f"{where}: the query names no factcheck metric: {query}"
    assert used <= names, f"{where}: not exported: {sorted(used - names)}"
    known = set().union(*(labels.get(name, set()) for name in used)) | PROMQL_WORDS
    for group in BY.findall(query):
        grouped = {label.strip() for label in group.split(",") if label.strip()}
        assert grouped <= known, f"{where}: unknown labels {sorted(grouped - known)} in {query}"
    for name, matchers in MATCHER.findall(query):
        selected = set(LABEL_IN_MATCHER.findall(matchers))
        assert selected <= labels[name], f"{where}: {name} has no label {sorted(selected - labels[name])}"


def test_dashboard_covers_the_promised_panels():
    dashboard = json.loads(DASHBOARD.read_text())
    panels = all_panels(dashboard["panels"])
    text = " ".join(expr for _, expr in queries())
    for metric in ("factcheck_stage_latency_seconds_bucket", "factcheck_time_to_first_token_seconds_bucket",
                   "factcheck_added_latency_seconds_bucket", "factcheck_sentences_total", "factcheck_active_streams",
                   "factcheck_upstream_errors_total", "factcheck_request_errors_total", "factcheck_batch_size_bucket",
                   "factcheck_batch_queue_wait_seconds_bucket", "factcheck_inference_seconds_bucket"):
        assert metric in text
    stage_panel = next(p for p in panels if p["title"].startswith("Stage latency"))
    quantiles = {re.search(r"histogram_quantile\(([\d.]+)", t["expr"]).group(1) for t in stage_panel["targets"]}
    assert quantiles == {"0.5", "0.95", "0.99"}
    assert "stage" in stage_panel["targets"][0]["expr"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))


def test_provisioning_wires_datasource_and_dashboards():
    datasource = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text())
    [source] = datasource["datasources"]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    dashboard = json.loads(DASHBOARD.read_text())
    uids = {p["datasource"]["uid"] for p in all_panels(dashboard["panels"]) if "datasource" in p}
    assert uids == {source["uid"]}
    provider = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "factcheck.yml").read_text())
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"


def test_prometheus_scrapes_the_proxy():
    config = yaml.safe_load((ROOT / "adapters" / "prometheus" / "prometheus.yml").read_text())
    [job] = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == ["proxy:8000"]


def test_compose_runs_proxy_prometheus_grafana_and_optional_searxng():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"proxy", "prometheus", "grafana", "searxng"} <= set(services)
    assert services["searxng"]["profiles"] == ["searxng"]
    assert all("profiles" not in services[name] for name in ("proxy", "prometheus", "grafana"))
    assert "8000:8000" in services["proxy"]["ports"]
    assert {v.split(":")[1] for v in services["proxy"]["volumes"]} == {"/data/models", "/data/index"}
    for name in ("prometheus", "grafana", "searxng"):
        for volume in services[name]["volumes"]:
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{name} mounts a missing {source}"


def test_dockerfile_has_variants_user_healthcheck_and_volumes():
    dockerfile = (ROOT / "Dockerfile").read_text()
    instructions = [line.split(None, 1) for line in dockerfile.splitlines() if line and not line[0].isspace()
                    and not line.startswith("#")]
    keywords = [parts[0] for parts in instructions]
    assert "ARG VARIANT=cpu" in dockerfile and "FROM base-${VARIANT}" in dockerfile
    assert re.search(r"FROM \$\{CUDA_IMAGE\} AS base-gpu", dockerfile) and "nvidia/cuda:" in dockerfile
    assert re.search(r'"\.\[(?:\w+,)*gpu(?:,\w+)*\]"', dockerfile) and "onnxruntime-gpu" in dockerfile
    user = [parts[1].strip() for parts in instructions if parts[0] == "USER"]
    assert user and user[-1] not in {"root", "0"}
    assert keywords.index("USER") > keywords.index("RUN")
    assert "HEALTHCHECK" in keywords and "/healthz" in dockerfile
    assert 'VOLUME ["/data/models", "/data/index"]' in dockerfile
    assert "FACTCHECK_HOME=/data" in dockerfile
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored
