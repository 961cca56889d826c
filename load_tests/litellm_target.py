"""LiteLLM's proxy as a load target: pass-through to the mock upstream, on loopback.

LiteLLM is not a dependency of this project: it pulls in a large dependency tree that would
pin shared packages (openai, pydantic, aiohttp) to its own choices, and two of its releases
were compromised on the registry (1.82.7 and 1.82.8, March 2026). So it lives in its own
virtualenv, pinned to 1.82.6, and runs as a child process:

    bash load_tests/install_litellm.sh            # creates ~/.cache/factcheck/litellm-venv

``LITELLM_BIN`` overrides where the ``litellm`` executable is found. The proxy runs offline:
the model cost map is read from the package (``LITELLM_LOCAL_MODEL_COST_MAP``), telemetry
and per-request access logs are off (this project's proxy keeps no access log either), one
uvicorn worker (this project's proxy is one process too).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import yaml

from load_tests.driver import Process, free_port

LITELLM_VERSION = "1.82.6"
DEFAULT_VENV = Path(os.environ.get("FACTCHECK_HOME", Path.home() / ".cache" / "factcheck")) / "litellm-venv"
MODEL = "m"
"""The model name clients send; LiteLLM maps it to the mock upstream as an OpenAI-compatible model."""


class LiteLLMUnavailable(RuntimeError):
    """The ``litellm`` executable is not installed where we look."""


def litellm_bin() -> str:
    """Path of the ``litellm`` executable: ``LITELLM_BIN``, the default venv, then ``PATH``."""
    candidates = [os.environ.get("LITELLM_BIN"), str(DEFAULT_VENV / "bin" / "litellm"), shutil.which("litellm")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise LiteLLMUnavailable(
        f"litellm[proxy]=={LITELLM_VERSION} is not installed: run `bash load_tests/install_litellm.sh` "
        "or set LITELLM_BIN to a litellm executable"
    )


def litellm_config(upstream_port: int) -> dict:
    """LiteLLM proxy config: one OpenAI-compatible model pointing at the mock upstream."""
    return {
        "model_list": [
            {
                "model_name": MODEL,
                "litellm_params": {
                    "model": f"openai/{MODEL}",
                    "api_base": f"http://127.0.0.1:{upstream_port}/v1",
                    "api_key": "sk-mock-upstream",
                },
            }
        ],
        "litellm_settings": {"telemetry": False, "drop_params": False},
    }


_LOG_CONFIG = {
    "version": 1,
    "disable_existing_loggers": False,
    "loggers": {"uvicorn.access": {"level": "WARNING"}, "uvicorn.error": {"level": "WARNING"}},
}


def start_litellm(upstream_port: int) -> Process:
    """Start LiteLLM's proxy on a free loopback port in front of the mock upstream."""
    executable = litellm_bin()
    workdir = Path(tempfile.mkdtemp(prefix="litellm-target-"))
    config = workdir / "config.yaml"
    config.write_text(yaml.safe_dump(litellm_config(upstream_port)))
    log_config = workdir / "log.json"
    log_config.write_text(json.dumps(_LOG_CONFIG))
    port = free_port()
    env = {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_LOG": "ERROR",
        "LITELLM_TELEMETRY": "False",
    }
    args = [executable, "--config", str(config), "--host", "127.0.0.1", "--port", str(port),
            "--num_workers", "1", "--log_config", str(log_config)]
    return Process(args, port, env, name="litellm", startup_timeout=180.0, cwd=workdir)
