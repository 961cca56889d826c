"""``factcheck serve``'s start-up (middleware/commands/serve.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_PREPARE = """
import json, sys
from middleware.commands.serve import _prepare_evidence
from middleware.settings import load_settings
settings = load_settings(None, **{"check.workers": WORKERS, "check.checker": "pipeline"})
_prepare_evidence(settings)
from middleware.evidence.index import LocalIndex
print(json.dumps([LocalIndex.exists(settings.evidence.index_dir), "onnxruntime" in sys.modules]))
"""


def _prepare(workers: int, home: Path) -> list[bool]:
    done = subprocess.run([sys.executable, "-c", _PREPARE.replace("WORKERS", str(workers))], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "FACTCHECK_HOME": str(home)})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_with_check_workers_the_demo_index_is_built_in_a_child_and_the_relay_keeps_no_model(tmp_path: Path) -> None:
    """The relay would otherwise hold the embedder it needed once for its whole life."""
    assert _prepare(2, tmp_path / "workers") == [True, False]
    assert _prepare(0, tmp_path / "in-process") == [True, True]  # its checks need the models anyway
