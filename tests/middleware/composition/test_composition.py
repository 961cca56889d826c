"""The composition root (middleware/composition/__init__.py): what a relay process loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("spacy", "thinc", "torch", "onnxruntime", "tokenizers", "trafilatura", "rapidfuzz")
"""The NLP, model and HTML libraries the checks use."""

_BUILD = """
import json, sys
import middleware.cli  # every command registered, as `factcheck serve` starts
from middleware.composition import build_app
from middleware.settings import Settings
build_app(Settings())
print(json.dumps(sorted(m for m in {heavy} if m in sys.modules)))
"""


@pytest.mark.parametrize("env", [
    {"FACTCHECK_CHECK__CHECKER": "pipeline", "FACTCHECK_CHECK__WORKERS": "2"},  # the checks in workers
    {"FACTCHECK_CHECK__CHECKER": "none"},
], ids=["workers", "no-checker"])
def test_a_relay_that_runs_no_check_itself_loads_no_nlp_or_model_library(env: dict[str, str], tmp_path) -> None:
    """A relay whose checks run in worker processes (or that checks nothing) imports none of
    the checks' libraries: hundreds of MB and seconds of start-up it would hold for nothing."""
    code = _BUILD.format(heavy=HEAVY)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
                          env={**os.environ, **env, "FACTCHECK_HOME": str(tmp_path)})
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_the_in_process_checker_still_gets_its_libraries(tmp_path) -> None:
    """The guard above is not vacuous: building the pipeline in the relay's own process
    (``check.workers: 0``) loads them."""
    code = _BUILD.replace("build_app(Settings())", "from middleware.composition import build_checker\n"
                                                  "build_checker(Settings())")
    done = subprocess.run([sys.executable, "-c", code.format(heavy=HEAVY)], capture_output=True, text=True,
                          timeout=300, check=True, env={**os.environ, "FACTCHECK_CHECK__CHECKER": "pipeline",
                                                        "FACTCHECK_CHECK__WORKERS": "0",
                                                        "FACTCHECK_HOME": str(tmp_path)})
    assert "spacy" in json.loads(done.stdout.splitlines()[-1])


def test_a_lazy_package_name_resolves_and_an_unknown_one_fails() -> None:
    import middleware.runtime

    assert middleware.runtime.resolve_model.__module__ == "middleware.runtime.resolve"
    with pytest.raises(AttributeError):
        middleware.runtime.no_such_name  # noqa: B018
