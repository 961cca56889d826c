"""Nothing phones home (issue 35): ``make demo``'s command (``factcheck demo --mode correct``)
runs in a network namespace of its own whose only resolver is a logging fake DNS
(``tests.support.fake_dns``); no name outside the configured hosts may be looked up, whatever
library asks (native code included: onnxruntime's telemetry resolves its collector from C++,
past any Python patch). The demo runs from an empty data directory and home, as on a fresh
clone (the index is built and the models loaded as ``make demo`` does), and the process stays
alive a while after the demo, since the uploads of a library's telemetry come on a timer
(onnxruntime's first lookup came 9 s after start, then every few seconds).

Needs root and ``unshare`` (util-linux) for the namespace; skipped otherwise."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from middleware.telemetry import TELEMETRY_OFF, disable_telemetry
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.slow

LINGER_S = 15.0
"""How long the demo's process stays up after the demo (telemetry uploads run on a timer)."""
CONFIGURED_HOSTS = frozenset({"localhost"})
"""Names the demo may look up: its upstream and proxy are 127.0.0.1 (no lookup at all);
``localhost`` is in /etc/hosts and would never reach the DNS anyway."""

_NAMESPACE_SCRIPT = """
set -e
mount --bind "$WORK/resolv.conf" /etc/resolv.conf
"$PYTHON" -m tests.support.fake_dns "$WORK/queries.log" > "$WORK/dns.out" 2>&1 &
DNS=$!
for _ in $(seq 50); do grep -q ready "$WORK/dns.out" 2>/dev/null && break; sleep 0.1; done
getent hosts probe.invalid || true  # proves the log records what is asked here
set +e
"$PYTHON" - <<'PY' > "$WORK/demo.out" 2>&1
import os, sys, time
from middleware.cli import app
try:
    app(["demo", "--mode", "correct"])
except SystemExit as exit_:
    if exit_.code:
        raise
time.sleep(float(os.environ["LINGER_S"]))
print("demo-finished")
PY
STATUS=$?
kill $DNS
exit $STATUS
"""


def _namespaces_available() -> bool:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "--net", "--mount", "true"], capture_output=True, timeout=30)
    return probe.returncode == 0


def lookups(log: Path) -> list[str]:
    return [line.split()[0] for line in log.read_text(encoding="utf-8").splitlines() if line and line[0] != "!"]


@pytest.mark.skipif(not _namespaces_available(), reason="needs root and unshare for a network namespace")
def test_make_demo_looks_up_no_name_beyond_the_configured_hosts(tmp_path: Path) -> None:
    (tmp_path / "resolv.conf").write_text("nameserver 127.0.0.1\noptions attempts:1 timeout:1\n")
    (tmp_path / "queries.log").touch()
    (tmp_path / "home").mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "WORK": str(tmp_path), "PYTHON": sys.executable,
        "PYTHONPATH": str(REPO_ROOT), "HOME": str(tmp_path / "home"), "FACTCHECK_HOME": str(tmp_path / "data"),
        "LINGER_S": str(LINGER_S),
    }  # a clean environment: none of the telemetry switches is set from outside
    result = subprocess.run(["unshare", "--net", "--mount", "--propagation", "private", "bash", "-c",
                             _NAMESPACE_SCRIPT], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=280)
    demo = (tmp_path / "demo.out").read_text(encoding="utf-8", errors="replace")
    assert result.returncode == 0, (result.stderr[-2000:], demo[-4000:])
    assert "demo-finished" in demo and "Q: " in demo, demo[-4000:]
    names = lookups(tmp_path / "queries.log")
    assert names[:1] == ["probe.invalid"], names  # the fake DNS answered the namespace's resolver
    demo_names = set(names) - {"probe.invalid"}
    assert demo_names <= CONFIGURED_HOSTS, sorted(demo_names)


def test_every_telemetry_switch_is_set_unless_the_operator_set_it() -> None:
    env = {"ORT_DISABLE_TELEMETRY": "0"}
    changed = disable_telemetry(env)
    assert env["ORT_DISABLE_TELEMETRY"] == "0" and "ORT_DISABLE_TELEMETRY" not in changed  # an explicit opt-in stands
    assert {k: env[k] for k in TELEMETRY_OFF if k != "ORT_DISABLE_TELEMETRY"} == {
        k: v for k, v in TELEMETRY_OFF.items() if k != "ORT_DISABLE_TELEMETRY"}
    # importing the engine set them in this process, before onnxruntime was imported
    assert all(os.environ.get(name) is not None for name in TELEMETRY_OFF)
