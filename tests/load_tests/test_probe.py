"""The ``python -m load_tests.probe`` command: the hostile probe of issue 23, replayed."""

from __future__ import annotations

import subprocess
import sys

from load_tests.probe import Result, print_table, run_probes


async def test_every_probe_passes_against_the_proxy():
    results = await run_probes("none", ["malformed", "faults", "limits", "rate", "ws", "stall", "amplification"])
    assert len(results) == 26
    assert [r for r in results if not r.passed] == []


def test_the_table_marks_failures(capsys):
    print_table([Result("faults", "a", True, "fine"), Result("limits", "b", False, "9 x 200")])
    out = capsys.readouterr().out
    assert "PASS    fine" in out and "FAIL    9 x 200" in out and "1 passed, 1 failed" in out


def test_the_command_runs_and_sets_its_exit_status():
    done = subprocess.run([sys.executable, "-m", "load_tests.probe", "--checker", "none", "--only", "malformed"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "9 passed, 0 failed" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "load_tests.probe", "--only", "nonsense"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "nonsense" in bad.stderr
