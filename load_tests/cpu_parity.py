"""Do two CPUs give the shipped int8 models the same numbers? (issue 47)

``run`` scores fixed (evidence, claim) pairs with the shipped verifier and embeds their claims
with the default embedder, on this process's CPU, and writes the probabilities, verdicts and
vectors to a JSON file; ``compare`` reads two such files and prints how far apart they are
(largest probability difference, argmax flips, verdicts that differ, embedding cosines). Run it
natively and on the other CPU (or under an emulator of one) and compare::

    python -m load_tests.cpu_parity run --out /tmp/vnni.json
    qemu-x86_64 -cpu Haswell-v4 .venv/bin/python -m load_tests.cpu_parity run --out /tmp/avx2.json
    python -m load_tests.cpu_parity compare /tmp/vnni.json /tmp/avx2.json

The pairs come from the project's own test data (``tests/data/edit_dev*.jsonl``: each claim and
its corrected original against their evidence sentences), so it runs on any clone; ``--pairs``
reads other rows of that shape or of the battery's (``claim`` and ``evidence``), e.g.
``../shared/data/dev-battery/lfqa_verification.jsonl``. ``--exact-int8 on|off`` forces
onnxruntime's exact-products switch (``middleware.runtime.cpu``) either way for the
experiment; the runtime itself has no such setting (``auto``, the default, is what it does).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from load_tests.bench_scorer import parity, thresholds

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PAIRS = (ROOT / "tests/data/edit_dev.jsonl", ROOT / "tests/data/edit_dev_generated.jsonl")
PROB_DIGITS = 7
VECTOR_DIGITS = 6


def pairs_of(row: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(id, evidence, claim) pairs of one row: the claim (``claim``, or ``text`` and its
    ``original``) against each gold evidence passage (``gold`` indexes, else every one)."""
    evidence = row["evidence"] if isinstance(row["evidence"], list) else [row["evidence"]]
    gold = row.get("gold") or range(len(evidence))
    claims = {"claim": row["claim"]} if "claim" in row else {"text": row["text"], "original": row["original"]}
    return [(f"{row['id']}/{kind}/e{i}", evidence[i], claim)
            for kind, claim in claims.items() if claim for i in gold if evidence[i]]


def load_pairs(files: Sequence[Path], limit: int, seed: int) -> list[tuple[str, str, str]]:
    """Every pair of ``files`` (jsonl), or a seeded sample of ``limit`` of them in file order."""
    pairs = [pair for path in files for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
             for pair in pairs_of(json.loads(line))]
    if 0 < limit < len(pairs):
        keep = set(random.Random(seed).sample(range(len(pairs)), limit))
        pairs = [pair for i, pair in enumerate(pairs) if i in keep]
    return pairs


def force_exact_int8(choice: str) -> None:
    """``on``/``off``: set or withhold onnxruntime's exact-products switch in every session this
    process makes, whatever the CPU (``auto``: the runtime's own choice)."""
    if choice == "auto":
        return
    import middleware.runtime.onnx_session as onnx_session

    onnx_session.exact_int8_switch_needed = lambda: choice == "on"  # type: ignore[assignment]


def cpu_record(choice: str) -> dict[str, Any]:
    """What this process's CPU is, as /proc/cpuinfo, numpy's CPUID probe and onnxruntime's kernels see it."""
    from numpy._core._multiarray_umath import __cpu_features__

    from middleware.runtime.cpu import describe, probe_graph, probe_sum

    graph = probe_graph()
    return {
        "describe": describe(),
        "machine": platform.machine(),
        "cpuid_features": sorted(name for name, on in __cpu_features__.items() if on and "AVX" in name),
        "int8_probe_sum": {"default": probe_sum(graph, False), "exact_switch": probe_sum(graph, True)},
        "exact_int8": choice,
    }


def verdict(probs: np.ndarray, labels: list[str], entailment: float, contradiction: float) -> str:
    """One pair's verdict at the manifest's thresholds: supported, contradicted or unsupported."""
    p = dict(zip(labels, probs, strict=True))
    if p["entailment"] >= entailment:
        return "supported"
    return "contradicted" if p["contradiction"] >= contradiction else "unsupported"


def run(args: argparse.Namespace) -> None:
    force_exact_int8(args.exact_int8)
    from middleware.runtime.loading import load_embedder, load_pair_scorer
    from middleware.settings import RuntimeSettings

    settings = RuntimeSettings(provider="cpu", intra_op_threads=args.threads)
    pairs = load_pairs(args.pairs or DEFAULT_PAIRS, args.limit, args.seed)
    record: dict[str, Any] = {"cpu": cpu_record(args.exact_int8), "pairs_from": [str(p) for p in args.pairs or DEFAULT_PAIRS],
                              "limit": args.limit, "seed": args.seed, "seconds": {}}
    started = time.perf_counter()
    scorer = load_pair_scorer("bundled", "nli", settings)
    entail_contra = thresholds(scorer.manifest.decision)
    probs = scorer.score_sync([(evidence, claim) for _, evidence, claim in pairs])
    record["seconds"]["verifier"] = round(time.perf_counter() - started, 2)
    record["verifier"] = {
        "labels": scorer.labels, "thresholds": entail_contra,
        "pairs": {pid: {"probs": [round(float(x), PROB_DIGITS) for x in row],
                        "verdict": verdict(row, scorer.labels, *entail_contra)}
                  for (pid, _, _), row in zip(pairs, probs, strict=True)},
    }
    if args.embedder:
        started = time.perf_counter()
        texts = sorted({claim for _, _, claim in pairs})
        vectors = load_embedder(settings).embed_sync(texts)
        record["seconds"]["embedder"] = round(time.perf_counter() - started, 2)
        record["embedder"] = {text: [round(float(x), VECTOR_DIGITS) for x in row]
                              for text, row in zip(texts, vectors, strict=True)}
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"{len(pairs)} pairs in {record['seconds']}; {record['cpu']['describe']}; "
          f"exact int8: {args.exact_int8}; int8 probe: {record['cpu']['int8_probe_sum']} -> {args.out}")


def differences(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """How far ``second``'s figures are from ``first``'s, over the pairs and texts both hold:
    ``bench_scorer.parity``'s columns, the counts of pairs whose argmax or verdict differs, and
    the pair that moved most."""
    a, b = first["verifier"]["pairs"], second["verifier"]["pairs"]
    common = sorted(a.keys() & b.keys())
    if not common:
        raise SystemExit("the two files share no pair: were they made from the same --pairs?")
    pa, pb = np.array([a[k]["probs"] for k in common]), np.array([b[k]["probs"] for k in common])
    labels = first["verifier"]["labels"]
    gaps = np.abs(pa - pb).max(axis=1)
    worst = common[int(gaps.argmax())]
    out: dict[str, Any] = {
        "pairs": len(common),
        **{name: round(value, 5) for name, value in parity(pb, pa, labels, *first["verifier"]["thresholds"]).items()},
        "mean_abs_diff": round(float(gaps.mean()), 5),
        "pairs_over_0.01": int((gaps > 0.01).sum()),
        "argmax_flips": int((pa.argmax(1) != pb.argmax(1)).sum()),
        "verdict_flips": sum(a[k]["verdict"] != b[k]["verdict"] for k in common),
        "worst_pair": {"id": worst, "first": a[worst]["probs"], "second": b[worst]["probs"]},
    }
    ea, eb = first.get("embedder", {}), second.get("embedder", {})
    texts = sorted(ea.keys() & eb.keys())
    if texts:
        va, vb = np.array([ea[t] for t in texts]), np.array([eb[t] for t in texts])
        out["embedder"] = {"texts": len(texts), "min_cosine": round(float((va * vb).sum(1).min()), 5),
                           "max_abs_diff": round(float(np.abs(va - vb).max()), 5)}
    return out


def compare(args: argparse.Namespace) -> None:
    first, second = (json.loads(path.read_text(encoding="utf-8")) for path in (args.first, args.second))
    found = differences(first, second)
    for name, record in (("first", first), ("second", second)):
        print(f"{name}: {record['cpu']['describe']}; exact int8: {record['cpu']['exact_int8']}; "
              f"int8 probe: {record['cpu']['int8_probe_sum']}; CPUID: {' '.join(record['cpu']['cpuid_features'])}")
    print(json.dumps(found, indent=1))
    if args.max_prob_diff is not None and found["max_abs_diff"] > args.max_prob_diff:
        print(f"FAIL: probabilities differ by {found['max_abs_diff']} > {args.max_prob_diff}", file=sys.stderr)
        raise SystemExit(1)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m load_tests.cpu_parity", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    scoring = commands.add_parser("run", help="score the fixed pairs on this CPU, write JSON")
    scoring.add_argument("--out", type=Path, required=True)
    scoring.add_argument("--pairs", type=Path, action="append", help="jsonl rows to pair (repeatable; default: "
                         "tests/data/edit_dev*.jsonl)")
    scoring.add_argument("--limit", type=int, default=0, help="seeded sample of this many pairs (0: all)")
    scoring.add_argument("--seed", type=int, default=13)
    scoring.add_argument("--exact-int8", choices=("auto", "on", "off"), default="auto")
    scoring.add_argument("--threads", type=int, default=1)
    scoring.add_argument("--embedder", action=argparse.BooleanOptionalAction, default=True)
    comparing = commands.add_parser("compare", help="how far two run files are apart")
    comparing.add_argument("first", type=Path)
    comparing.add_argument("second", type=Path)
    comparing.add_argument("--max-prob-diff", type=float, help="exit 1 where the probabilities differ by more")
    args = parser.parse_args(argv)
    run(args) if args.command == "run" else compare(args)


if __name__ == "__main__":
    main()
