"""The manifest of an exported model directory: what the graphs compute and how to feed them.

An export directory holds ``manifest.json``, the ONNX graph(s) and the tokenizer files. The
runtime reads only the manifest and ``tokenizer.json``; it never imports torch or transformers.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

MANIFEST_NAME = "manifest.json"
FORMAT_VERSION = 1

Task = Literal["embed", "rerank", "nli", "seq2seq"]
TASKS: tuple[str, ...] = ("embed", "rerank", "nli", "seq2seq")


class ManifestError(ValueError):
    """An export directory is missing, incomplete or does not match its manifest."""


class Tree(BaseModel):
    """One regression tree, node by node: an inner node sends a reading whose ``feature`` is
    at most ``threshold`` (compared in float32, as scikit-learn does) to ``left``, else to
    ``right``; a leaf (``feature`` None) adds its ``value`` to the raw score."""

    model_config = ConfigDict(extra="forbid")

    feature: list[str | None]
    threshold: list[float]
    left: list[int]
    right: list[int]
    value: list[float]


class TreeEnsemble(BaseModel):
    """Gradient-boosted trees for one probability: p = sigmoid(init + sum of the leaves
    reached, the learning rate already applied to the values). A feature the reading lacks
    counts as 0 (a rule that did not fire)."""

    model_config = ConfigDict(extra="forbid")

    init: float
    trees: list[Tree]


class LinearModel(BaseModel):
    """Logistic regression for one probability: p = sigmoid(intercept + sum of coefficient x
    reading over the named features; the fit's standardisation is already folded into the
    numbers). A feature the reading lacks counts as 0."""

    model_config = ConfigDict(extra="forbid")

    intercept: float
    coefficients: dict[str, float]


class CombinerWeights(BaseModel):
    """The hybrid verifier's learned decision (``factcheck fit-combiner``): two calibrated
    models over its named features (a linear model or a tree ensemble each), and where each
    decides."""

    model_config = ConfigDict(extra="forbid")

    features: list[str] = Field(description="the features the ensembles were fitted on")
    attributable: LinearModel | TreeEnsemble = Field(description="P(the evidence supports the claim)")
    contradictory: TreeEnsemble = Field(description="P(the evidence contradicts the claim)")
    attributable_threshold: float = Field(description="P(attributable) at the balanced-accuracy optimum")
    contradictory_threshold: float = Field(
        description="P(contradictory) at the target precision on held-out pairs (or the most precise cut-off "
        "where the target is out of reach: see metrics)"
    )
    edit_threshold: float = Field(
        description="P(attributable) of an edited sentence at >= target precision: what an applied edit needs"
    )
    record_threshold: float | None = Field(
        None,
        description="P(attributable) at or above which a claim checked against evidence that holds structured records "
        "counts as supported: chosen end to end on train answers (factcheck fit-record-threshold); None: "
        "attributable_threshold",
    )
    fitted_on: str = Field(description="the data the weights and thresholds were chosen on (never a test split)")
    metrics: dict[str, float] = Field(default_factory=dict, description="held-out figures of the fit")


class Decision(BaseModel):
    """NLI decision thresholds chosen on held-out dev data (``factcheck calibrate-verifier``),
    never on a test set: how window scores are aggregated and where P(entailment) and
    P(contradiction) decide."""

    model_config = ConfigDict(extra="forbid")

    aggregation: Literal["max"] = Field("max", description="over evidence windows: the best window decides")
    entailment: float = Field(description="P(entailment) at or above which the claim counts as supported")
    contradiction: float = Field(description="P(contradiction) at or above which an aligned window contradicts")
    precise_entailment: float = Field(
        description="P(entailment) reaching the target precision on dev: what an edit must reach to be applied"
    )
    target_precision: float = Field(description="precision of 'supported' on dev at precise_entailment")
    calibrated_on: str = Field(description="the dev data the thresholds were chosen on")
    dev_metrics: dict[str, float] = Field(default_factory=dict, description="balanced accuracy, AUC ... on dev")
    hybrid_strong_entailment: float | None = Field(
        None, description="hybrid verifier: P(entailment) that outweighs an entity or relation mismatch"
    )
    hybrid_nli_only_contradiction: float | None = Field(
        None, description="hybrid verifier: P(contradiction) an unlocalised NLI contradiction needs"
    )
    combiner: CombinerWeights | None = Field(
        None, description="hybrid verifier: the learned decision over its features (replaces the hand cut-offs)"
    )


class Manifest(BaseModel):
    """Describes one exported model. ``files`` maps every file of the export (graphs and
    tokenizer files, not the manifest itself) to its sha256."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = FORMAT_VERSION
    task: Task
    source: str = Field(description="hub id or local path the export was made from")
    quantization: Literal["none", "int8"] = "none"
    quantized_graphs: list[str] = Field(
        default_factory=list, description="roles of the graphs quantised (seq2seq: the decoder only)"
    )
    fused: bool = Field(False, description="onnxruntime's transformer fusions (attention, layer norm) applied")
    opset: int
    max_length: int = Field(description="tokens per input sequence; longer inputs are truncated")
    labels: list[str] = Field(
        default_factory=list, description="output columns in order (nli/rerank logits); empty otherwise"
    )
    graphs: dict[str, str] = Field(description="role -> file: 'model', or 'encoder' and 'decoder' for seq2seq")
    inputs: dict[str, list[str]] = Field(description="role -> graph input names in order")
    outputs: dict[str, list[str]] = Field(description="role -> graph output names in order")
    variants: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="the same weights stored otherwise: precision ('weights-int8', 'fp32', 'fp16') -> role -> "
        "file; the runtime picks one by device and runtime.precision (middleware.runtime.precision)",
    )
    pooling: Literal["mean", "cls"] | None = Field(None, description="embed: pooling folded into the graph")
    dim: int | None = Field(None, description="embed: embedding size; seq2seq: hidden size")
    special_tokens: dict[str, int] = Field(
        default_factory=dict, description="seq2seq: pad, eos and decoder_start token ids"
    )
    files: dict[str, str] = Field(default_factory=dict, description="file name -> sha256")
    decision: Decision | None = Field(None, description="nli: calibrated decision thresholds")

    def write(self, directory: Path) -> Path:
        path = Path(directory) / MANIFEST_NAME
        path.write_text(self.model_dump_json(indent=2) + "\n", encoding="utf-8")
        return path


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def checksum_files(directory: Path) -> dict[str, str]:
    """sha256 of every regular file in ``directory`` (not recursive), manifest excluded."""
    return {
        p.name: sha256_file(p)
        for p in sorted(Path(directory).iterdir())
        if p.is_file() and p.name != MANIFEST_NAME
    }


def is_export_dir(path: Path) -> bool:
    return (Path(path) / MANIFEST_NAME).is_file()


def read_manifest(directory: Path, verify: bool = True) -> Manifest:
    """Load ``directory/manifest.json``; with ``verify``, check every listed file's sha256."""
    directory = Path(directory)
    path = directory / MANIFEST_NAME
    if not path.is_file():
        raise ManifestError(f"{directory} is not an exported model directory (no {MANIFEST_NAME})")
    try:
        manifest = Manifest.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, ValueError) as exc:
        raise ManifestError(f"{path}: invalid manifest: {exc}") from exc
    if manifest.format_version > FORMAT_VERSION:
        raise ManifestError(f"{path}: format {manifest.format_version} is newer than this runtime's")
    missing = [g for g in graph_files(manifest) if g not in manifest.files]
    if missing:
        raise ManifestError(f"{path}: graphs {missing} have no checksum")
    if verify:
        verify_files(directory, manifest)
    return manifest


def graph_files(manifest: Manifest) -> list[str]:
    """Every graph file the export ships: its graphs and their variants."""
    return [*manifest.graphs.values(), *(f for files in manifest.variants.values() for f in files.values())]


def verify_files(directory: Path, manifest: Manifest) -> None:
    for name in manifest.files:
        verify_file(directory, manifest, name)


def verify_file(directory: Path, manifest: Manifest, name: str) -> None:
    """Raise ManifestError unless ``directory/name`` is there and matches its listed sha256."""
    file = Path(directory) / name
    if not file.is_file():
        raise ManifestError(f"{directory}: {name} is listed in the manifest but missing")
    if sha256_file(file) != manifest.files[name]:
        raise ManifestError(f"{directory}: {name} does not match its sha256 in the manifest")
