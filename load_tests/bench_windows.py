"""NLI evidence windows before and after packing (issue 18): per-claim latency of the bundled
verifier's assessment on long evidence (WiCE dev pages), one claim at a time and eight at once,
with the old sliding windows (a window at every sentence, from ``git show REF:...nli.py``) and
the packed ones (one sentence of overlap), side by side in one run.

    python -m load_tests.bench_windows --wice ../shared/data/wice/claim_dev.jsonl [--ref HEAD~1]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from middleware.pipeline.verifiers import nli as nli_mod
from middleware.pipeline.verifiers.base import passages_from_texts
from middleware.runtime.loading import load_pair_scorer
from middleware.settings import RuntimeSettings


def _old_build_windows(ref: str):
    source = subprocess.run(
        ["git", "show", f"{ref}:middleware/pipeline/verifiers/nli.py"], check=True, capture_output=True, text=True
    ).stdout
    path = Path(tempfile.mkdtemp()) / "old_nli.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("old_nli", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_nli"] = module
    spec.loader.exec_module(module)
    return module.build_windows


async def _run(rows, scorer, concurrency: int) -> tuple[float, float, float]:
    verifier = nli_mod.NLIVerifier(scorer, max_windows=64)
    gate = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    windows: list[int] = []

    async def one(row) -> None:
        async with gate:
            evidence = passages_from_texts([" ".join(s for s in row["evidence"] if s.strip())])
            started = time.perf_counter()
            assessment = await verifier.assess(row["claim"], evidence)
            latencies.append((time.perf_counter() - started) * 1000)
            windows.append(len(assessment.windows))

    started = time.perf_counter()
    await asyncio.gather(*(one(r) for r in rows))
    return statistics.median(latencies), statistics.mean(windows), len(rows) / (time.perf_counter() - started)


async def main(args: argparse.Namespace) -> None:
    rows = [json.loads(line) for line in Path(args.wice).open(encoding="utf-8") if line.strip()][: args.claims]
    scorer = load_pair_scorer("bundled", "nli", RuntimeSettings(provider="cpu", intra_op_threads=args.threads))
    strategies = (("sliding (before)", _old_build_windows(args.ref)), ("packed (after)", nli_mod.build_windows))
    for repeat in range(args.repeats):
        for name, build in strategies:
            nli_mod.build_windows = build
            for concurrency in (1, 8):
                median, per_claim, rate = await _run(rows, scorer, concurrency)
                print(
                    f"{repeat} {name:17s} concurrency {concurrency}: median {median:7.1f} ms/claim, "
                    f"{per_claim:5.1f} windows/claim, {rate:5.2f} claims/s"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wice", required=True, help="WiCE claim_dev.jsonl")
    parser.add_argument("--ref", default="0405181", help="git revision with the sliding windows")
    parser.add_argument("--claims", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    asyncio.run(main(parser.parse_args()))
