"""Build the configured editor (and, for the standalone commands, a verifier) from settings."""

from __future__ import annotations

import logging
from pathlib import Path

from middleware.composition.backends import build_verifier, load_nli_scorer, with_rules
from middleware.interfaces import ChatModel, Providers
from middleware.pipeline.alignment import Aligner
from middleware.pipeline.verifiers import HybridVerifier, NLIVerifier, SlotsVerifier, Verifier
from middleware.revise.editors.llm_editor import LLMEditor
from middleware.revise.editors.seq2seq_editor import Seq2SeqEditor, read_template
from middleware.revise.editors.slots_editor import SlotsEditor
from middleware.revise.gate import EditGate, GatePolicy
from middleware.revise.guards import EditGuard, GuardedEditor
from middleware.settings import Settings
from onnx_models.manifest import is_export_dir
from onnx_models.sources import BUNDLED, BUNDLED_DIRS

log = logging.getLogger(__name__)

EDITORS = ("slots", "llm", "seq2seq")


def build_editor(
    settings: Settings,
    verifier: Verifier,
    *,
    backend: str | None = None,
    model: str | None = None,
    chat: ChatModel | None = None,
    guard: EditGuard | None = None,
    providers: Providers = Providers(),
) -> GuardedEditor:
    """The editor ``settings.pipeline.editor`` (or ``backend``) names, behind the guards.

    - slots: re-verifies candidate edits with ``verifier``;
    - llm: ``chat``, or the chat client ``providers`` builds from the pipeline's LLM settings;
    - seq2seq: ``model`` or ``settings.pipeline.seq2seq_model`` (hub id, checkpoint or export)."""
    name = backend or settings.pipeline.editor
    guard = guard or EditGuard()
    gate = build_gate(settings, verifier)
    if name == "slots":
        aligner = verifier.slots.aligner if isinstance(verifier, HybridVerifier) else getattr(verifier, "aligner", None)
        return GuardedEditor(SlotsEditor(verifier, aligner=aligner, guard=guard, gate=gate), guard, gate)
    if name == "llm":
        return GuardedEditor(LLMEditor(chat or providers.chat(settings), guard=guard), guard, gate)
    if name == "seq2seq":
        spec = model or settings.pipeline.seq2seq_model
        if not spec:
            raise ValueError("the seq2seq editor needs a model: set pipeline.seq2seq_model or pass --model")
        from middleware.runtime import load_seq2seq

        served = load_seq2seq(spec, settings.runtime)
        template = read_template(spec) if Path(spec).is_dir() else read_template(None)
        return GuardedEditor(Seq2SeqEditor(served, template=template), guard, gate)
    raise ValueError(f"unknown editor {name!r}; expected one of {EDITORS}")


def build_gate(settings: Settings, verifier: Verifier) -> EditGate:
    """The edit gate over the pipeline's verifier and its NLI model (when it has one)."""
    nli = verifier.nli if isinstance(verifier, HybridVerifier) else verifier if isinstance(verifier, NLIVerifier) else None
    combiner = verifier.combiner if isinstance(verifier, HybridVerifier) else None
    minimum = settings.pipeline.edit_min_entailment
    if minimum is None:
        minimum = nli.precise_entailment if nli is not None else 0.5
    policy = GatePolicy(
        min_entailment=minimum,
        max_context_contradiction=settings.pipeline.edit_max_context_contradiction,
        wording=settings.pipeline.edit_wording,
        grounded_entailment=min(minimum, nli.entail_threshold) if nli is not None else minimum,
        supported_edit=combiner.edit_threshold if combiner is not None else None,
        grounded_supported=combiner.attributable_threshold if combiner is not None else None,
    )
    slots = verifier.slots if isinstance(verifier, HybridVerifier) else verifier if isinstance(verifier, SlotsVerifier) else None
    return EditGate(verifier, nli, policy, slots, disabled=settings.pipeline.rules.gate_disabled)


def nli_available(settings: Settings) -> bool:
    """Is there an NLI model to use without downloading? (the bundled export, or a
    configured local export or checkpoint directory)"""
    spec = settings.runtime.nli_model
    if spec == BUNDLED:
        return is_export_dir(BUNDLED_DIRS["nli"])
    return Path(spec).is_dir()


def build_eval_verifier(settings: Settings, name: str = "auto", *, embed: bool = False) -> Verifier:
    """The verifier of the standalone commands (``edit``, ``eval-edit``): 'auto' is hybrid
    when an NLI model is available offline, else slots. Alignment is lexical unless
    ``embed`` (then the pipeline's own builder, with the embedder, is used)."""
    if name == "auto":
        name = "hybrid" if nli_available(settings) else "slots"
    if embed:
        return build_verifier(settings, name)
    slots = SlotsVerifier(
        Aligner(None), top_k=settings.pipeline.verify_top_k, disabled=settings.pipeline.rules.disabled_for(False)
    )
    if name == "slots":
        return slots
    if name not in ("hybrid", "nli"):
        raise ValueError(f"unknown verifier {name!r} for this command; expected auto, slots, nli or hybrid")
    nli = NLIVerifier(load_nli_scorer(settings), max_windows=settings.pipeline.nli_max_windows)
    if name == "nli":
        return nli
    return with_rules(HybridVerifier(nli, slots, learned=settings.pipeline.rules.decision == "learned"), settings)


def build_edit_pair(
    settings: Settings, backend: str, model: str | None, verifier_name: str, embed: bool
) -> tuple[Verifier, GuardedEditor]:
    """The verifier and the editor of ``factcheck edit`` and ``eval-edit``."""
    verifier = build_eval_verifier(settings, verifier_name, embed=embed)
    return verifier, build_editor(settings, verifier, backend=backend, model=model)
