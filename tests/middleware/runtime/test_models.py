"""Export parity on tiny random models built offline: ONNX fp32 against PyTorch (atol 1e-4),
int8 keeping the argmax, the served wrappers, and the resolver's cache."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from middleware.interfaces import Embedder, PairScorer  # noqa: E402
from middleware.runtime import (  # noqa: E402
    OnnxEmbedder,
    OnnxPairScorer,
    OnnxSeq2Seq,
    cache_dir,
    clear_models,
    fuse,
    load_pair_scorer,
    resolve_model,
)
from middleware.settings import RuntimeSettings  # noqa: E402
from onnx_models.export import export_model  # noqa: E402
from middleware.types import NLI_HEAD_LABELS  # noqa: E402
from onnx_models.manifest import ManifestError, read_manifest, sha256_file  # noqa: E402
from tests.support.tiny_models import save_bert_tokenizer, save_t5_tokenizer, tiny_bert_config  # noqa: E402

WORDS = [
    "the", "a", "tower", "river", "city", "paris", "france", "was", "is", "in", "on", "of", "built",
    "opened", "completed", "born", "died", "won", "prize", "physics", "chemistry", "1889", "1903",
    "1867", "warsaw", "london", "big", "small", "old", "new", "first", "last", "king", "queen",
    "war", "peace", "not", "never", "always", "blue", "red", "green", "mountain", "sea", "ocean",
    "flows", "into", "north", "south", "east", "west",
]
HEAD_LABELS = list(NLI_HEAD_LABELS)


def random_texts(n: int, seed: int, min_words: int = 2, max_words: int = 40) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(min_words, max_words))) for _ in range(n)]


def random_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    firsts, seconds = random_texts(n, seed, 5, 40), random_texts(n, seed + 1, 2, 15)
    return list(zip(firsts, seconds, strict=True))


def settings_for(tmp: Path) -> RuntimeSettings:
    return RuntimeSettings(provider="cpu", models_dir=tmp / "cache", max_batch=8, max_wait_ms=1.0)


# ------------------------------------------------------------------ tiny checkpoints


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ckpt")
    torch.manual_seed(0)
    paths = {name: root / name for name in ("embed", "nli", "rerank", "seq2seq")}
    transformers.BertModel(tiny_bert_config()).save_pretrained(str(paths["embed"]))
    nli_config = tiny_bert_config(num_labels=3, id2label=dict(enumerate(HEAD_LABELS)))
    transformers.BertForSequenceClassification(nli_config).save_pretrained(str(paths["nli"]))
    transformers.BertForSequenceClassification(tiny_bert_config(num_labels=1)).save_pretrained(str(paths["rerank"]))
    for name in ("embed", "nli", "rerank"):
        save_bert_tokenizer(paths[name])
    vocab = save_t5_tokenizer(paths["seq2seq"], WORDS)
    t5 = transformers.T5Config(
        vocab_size=vocab, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1, initializer_factor=2.0,  # varied outputs
    )
    transformers.T5ForConditionalGeneration(t5).save_pretrained(str(paths["seq2seq"]))
    return paths


@pytest.fixture(scope="module")
def exports(checkpoints: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """fp32 exports of each checkpoint; int8 straight from the checkpoint for nli and seq2seq,
    and from the fp32 export (no re-export) for embed and rerank."""
    root = tmp_path_factory.mktemp("onnx")
    out = {}
    for task, path in checkpoints.items():
        out[f"{task}-fp32"] = export_model(path, task, root / f"{task}-fp32", max_length=64)
        source = path if task in ("nli", "seq2seq") else out[f"{task}-fp32"]
        out[f"{task}-int8"] = export_model(source, task, root / f"{task}-int8", quantize="int8", max_length=64)
    return out


def _torch_inputs(directory: Path, texts: list, pairs: bool = False) -> dict[str, object]:
    tok = transformers.AutoTokenizer.from_pretrained(str(directory))
    if pairs:
        return tok([a for a, _ in texts], [b for _, b in texts], padding=True, truncation=True,
                   max_length=64, return_tensors="pt")
    return tok(texts, padding=True, truncation=True, max_length=64, return_tensors="pt")


# ------------------------------------------------------------------ manifests


def test_manifest_describes_the_export(exports: dict[str, Path]) -> None:
    nli = read_manifest(exports["nli-int8"])
    assert nli.task == "nli" and nli.quantization == "int8" and nli.labels == HEAD_LABELS
    assert nli.max_length == 64 and nli.opset >= 14
    assert set(nli.files) >= {"model.onnx", "tokenizer.json"}
    for name, digest in nli.files.items():
        assert sha256_file(exports["nli-int8"] / name) == digest
    s2s = read_manifest(exports["seq2seq-fp32"])
    assert s2s.graphs == {"encoder": "encoder.onnx", "decoder": "decoder.onnx"}
    assert s2s.special_tokens == {"pad": 0, "eos": 1, "decoder_start": 0}
    assert read_manifest(exports["embed-fp32"]).pooling == "mean"
    assert read_manifest(exports["embed-fp32"]).fused  # BERT: onnxruntime's attention fusions apply
    assert nli.quantized_graphs == ["model"]
    assert read_manifest(exports["rerank-fp32"]).labels == ["LABEL_0"]


def test_int8_from_an_fp32_export(checkpoints: dict[str, Path], exports: dict[str, Path], tmp_path: Path) -> None:
    derived = read_manifest(exports["rerank-int8"])
    assert derived.quantization == "int8" and derived.source == str(checkpoints["rerank"])
    assert derived.files["tokenizer.json"] == read_manifest(exports["rerank-fp32"]).files["tokenizer.json"]
    with pytest.raises(ValueError, match="already quantised"):
        export_model(exports["rerank-int8"], "rerank", tmp_path / "again", quantize="int8")
    with pytest.raises(ValueError, match="only --quantize int8"):
        export_model(exports["rerank-fp32"], "rerank", tmp_path / "again")


def test_damaged_file_fails_verification(exports: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(exports["rerank-int8"], copy)
    with open(copy / "tokenizer.json", "a", encoding="utf-8") as fh:
        fh.write(" ")
    with pytest.raises(ManifestError, match="tokenizer.json"):
        read_manifest(copy)


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files sha256-hashed while the test runs."""
    import onnx_models.manifest

    names: list[str] = []

    def counting(path: Path, chunk: int = 1 << 20) -> str:
        names.append(Path(path).name)
        return sha256_file(path, chunk)

    monkeypatch.setattr(onnx_models.manifest, "sha256_file", counting)
    return names


def test_a_cpu_session_verifies_the_files_it_loads_once(exports: dict[str, Path], tmp_path: Path,
                                                        hashed: list[str]) -> None:
    import shutil

    copy = shutil.copytree(exports["nli-int8"], tmp_path / "nli")
    (copy / "model.weights-int8.onnx").write_bytes(b"a GPU's copy, never loaded on the CPU")
    settings = RuntimeSettings(provider="cpu")
    scorer = OnnxPairScorer(resolve_model(str(copy), "nli", settings), settings, "nli")
    OnnxPairScorer(copy, settings, "nli")
    tokenizer_files = [name for name in read_manifest(copy, verify=False).files if not name.endswith(".onnx")]
    assert tokenizer_files and sorted(hashed) == sorted([*tokenizer_files, "model.onnx"])
    assert scorer.session.path.name == "model.onnx"


def test_a_damaged_graph_that_is_loaded_fails_verification(exports: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    copy = shutil.copytree(exports["nli-int8"], tmp_path / "nli")
    OnnxPairScorer(copy, RuntimeSettings(provider="cpu"), "nli")  # verified once, intact
    with open(copy / "model.onnx", "ab") as fh:
        fh.write(b" ")
    with pytest.raises(ManifestError, match="model.onnx does not match its sha256"):
        OnnxPairScorer(copy, RuntimeSettings(provider="cpu"), "nli")
    (copy / "model.weights-int8.onnx").write_bytes(b"broken")
    with pytest.raises(ManifestError, match="model.weights-int8.onnx does not match its sha256"):
        OnnxPairScorer(copy, RuntimeSettings(provider="cpu", precision="fp32"), "nli")


def test_a_graph_rewritten_with_its_size_and_time_put_back_is_verified_again(
    exports: dict[str, Path], tmp_path: Path
) -> None:
    import os
    import shutil

    copy = shutil.copytree(exports["nli-int8"], tmp_path / "nli")
    graph = copy / "model.onnx"
    OnnxPairScorer(copy, RuntimeSettings(provider="cpu"), "nli")  # verified once, intact
    before = graph.stat()
    data = bytearray(graph.read_bytes())
    data[-1] ^= 0xFF  # one byte changed in place: the same size
    graph.write_bytes(bytes(data))
    os.utime(graph, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(ManifestError, match="model.onnx does not match its sha256"):
        OnnxPairScorer(copy, RuntimeSettings(provider="cpu"), "nli")


def test_labels_override_and_count_check(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    out = export_model(checkpoints["nli"], "nli", tmp_path / "x", labels=["attributable", "extrapolatory", "c"])
    assert read_manifest(out).labels == ["attributable", "extrapolatory", "c"]
    with pytest.raises(ValueError, match="2 labels"):
        export_model(checkpoints["nli"], "nli", tmp_path / "y", labels=["a", "b"])


# ------------------------------------------------------------------ parity


def test_embed_fp32_matches_pytorch(checkpoints: dict[str, Path], exports: dict[str, Path]) -> None:
    texts = random_texts(24, seed=1)
    model = transformers.BertModel.from_pretrained(str(checkpoints["embed"])).eval()
    inputs = _torch_inputs(checkpoints["embed"], texts)
    with torch.no_grad():
        hidden = model(**inputs).last_hidden_state
    mask = inputs["attention_mask"].unsqueeze(-1).float()
    expected = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=1).numpy()
    embedder = OnnxEmbedder(exports["embed-fp32"], RuntimeSettings(provider="cpu"))
    got = embedder.embed_sync(texts, batch_size=7)
    np.testing.assert_allclose(got, expected, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("task", ["nli", "rerank"])
def test_classifier_fp32_matches_pytorch(task: str, checkpoints: dict[str, Path], exports: dict[str, Path]) -> None:
    pairs = random_pairs(24, seed=2)
    model = transformers.BertForSequenceClassification.from_pretrained(str(checkpoints[task])).eval()
    with torch.no_grad():
        logits = model(**_torch_inputs(checkpoints[task], pairs, pairs=True)).logits
    expected = torch.softmax(logits, -1) if task == "nli" else torch.sigmoid(logits)
    scorer = OnnxPairScorer(exports[f"{task}-fp32"], RuntimeSettings(provider="cpu"), task)
    np.testing.assert_allclose(scorer.score_sync(pairs, batch_size=5), expected.numpy(), atol=1e-4)
    assert scorer.labels == (HEAD_LABELS if task == "nli" else ["relevance"])


def _raw_logits(directory: Path, pairs: list[tuple[str, str]]) -> np.ndarray:
    from middleware.runtime.onnx_session import OnnxSession
    from middleware.runtime.tokenizer import TextTokenizer

    manifest = read_manifest(directory)
    tok = TextTokenizer(directory / "tokenizer.json", manifest.max_length, manifest.inputs["model"])
    session = OnnxSession(directory / "model.onnx", RuntimeSettings(provider="cpu"))
    return session.run(tok.collate(tok.encode_pairs(pairs)))[0]


def test_int8_keeps_the_argmax(exports: dict[str, Path]) -> None:
    pairs = random_pairs(200, seed=3)
    fp32, int8 = _raw_logits(exports["nli-fp32"], pairs), _raw_logits(exports["nli-int8"], pairs)
    agreement = float((fp32.argmax(1) == int8.argmax(1)).mean())
    assert agreement >= 0.95, agreement


def test_int8_embeddings_stay_close(exports: dict[str, Path]) -> None:
    texts = random_texts(100, seed=4)
    fp32 = OnnxEmbedder(exports["embed-fp32"], RuntimeSettings(provider="cpu")).embed_sync(texts)
    int8 = OnnxEmbedder(exports["embed-int8"], RuntimeSettings(provider="cpu")).embed_sync(texts)
    cosine = (fp32 * int8).sum(1)
    assert cosine.min() > 0.95, cosine.min()
    # nearest neighbours (argmax of similarity to the other texts) mostly survive quantisation
    sim32, sim8 = fp32 @ fp32.T - 2 * np.eye(100), int8 @ int8.T - 2 * np.eye(100)
    assert (sim32.argmax(1) == sim8.argmax(1)).mean() >= 0.95


@pytest.mark.parametrize("precision", ["int8", "fp32"])
async def test_a_pair_scores_the_same_alone_and_in_any_batch(exports: dict[str, Path], precision: str) -> None:
    """Dynamic int8 scales activations per input tensor: batched with other users' pairs (of
    other lengths, so with padding) a pair must still get the probabilities it gets alone."""
    scorer = OnnxPairScorer(exports[f"nli-{precision}"], RuntimeSettings(provider="cpu"), "nli")
    pairs = random_pairs(40, seed=11)
    alone = np.stack([scorer.score_sync([pair], 1)[0] for pair in pairs[:8]])
    in_batches = scorer.score_sync(pairs[:8] + pairs[8:], 16)[:8]
    through_batcher = (await asyncio.gather(*(scorer.score([p]) for p in pairs)))[:8]
    assert np.abs(alone - in_batches).max() <= 1e-4
    assert np.abs(alone - np.concatenate(through_batcher)).max() <= 1e-4
    assert scorer.per_sequence == (precision == "int8")
    await scorer.aclose()


# ------------------------------------------------------------------ seq2seq


@pytest.fixture(scope="module")
def t5(checkpoints: dict[str, Path]) -> object:
    return transformers.T5ForConditionalGeneration.from_pretrained(str(checkpoints["seq2seq"])).eval()


def test_seq2seq_encoder_and_decoder_match_pytorch(t5: object, checkpoints: dict[str, Path],
                                                   exports: dict[str, Path]) -> None:
    texts = random_texts(6, seed=5)
    onnx = OnnxSeq2Seq(exports["seq2seq-fp32"], RuntimeSettings(provider="cpu"))
    states, mask = onnx.encode(texts)
    inputs = _torch_inputs(checkpoints["seq2seq"], texts)
    assert (mask == inputs["attention_mask"].numpy()).all()
    with torch.no_grad():
        expected_states = t5.get_encoder()(**inputs).last_hidden_state
        prefix = torch.randint(0, 40, (6, 4))
        expected = t5(encoder_outputs=(expected_states,), attention_mask=inputs["attention_mask"],
                      decoder_input_ids=prefix, use_cache=False).logits.numpy()
    np.testing.assert_allclose(states, expected_states.numpy(), atol=1e-4)
    got = onnx.decoder.run({"decoder_input_ids": prefix.numpy(), "encoder_hidden_states": states,
                            "encoder_attention_mask": mask})[0]
    np.testing.assert_allclose(got, expected, atol=1e-4)


def test_greedy_decoding_matches_generate(t5: object, checkpoints: dict[str, Path],
                                          exports: dict[str, Path]) -> None:
    texts = random_texts(5, seed=6)
    onnx = OnnxSeq2Seq(exports["seq2seq-fp32"], RuntimeSettings(provider="cpu"))
    states, mask = onnx.encode(texts)
    got = onnx.greedy(states, mask, max_new_tokens=10)
    inputs = _torch_inputs(checkpoints["seq2seq"], texts)
    with torch.no_grad():
        ref = t5.generate(**inputs, max_new_tokens=10, do_sample=False, num_beams=1).tolist()
    assert len({tuple(ids) for ids in got}) > 1  # a model that says something
    for ours, theirs in zip(got, ref, strict=True):
        theirs = theirs[1:]  # drop the decoder start token
        theirs = theirs[: theirs.index(1)] if 1 in theirs else theirs
        assert ours == theirs
    assert onnx.generate(texts, max_new_tokens=10) == [onnx.tokenizer.decode(ids) for ids in got]


def test_fusion_in_decoder_accepts_concatenated_states(t5: object, exports: dict[str, Path]) -> None:
    onnx = OnnxSeq2Seq(exports["seq2seq-fp32"], RuntimeSettings(provider="cpu"))
    groups = [random_texts(3, seed=7), random_texts(1, seed=8)]
    states, mask = onnx.encode([t for g in groups for t in g])
    fused, fused_mask = fuse(states, mask, [3, 1])
    assert fused.shape[1] == 3 * states.shape[1] and fused_mask[1, states.shape[1]:].sum() == 0
    prefix = np.array([[0, 5, 9], [0, 7, 3]], dtype=np.int64)
    got = onnx.decoder.run({"decoder_input_ids": prefix, "encoder_hidden_states": fused,
                            "encoder_attention_mask": fused_mask})[0]
    with torch.no_grad():
        expected = t5(encoder_outputs=(torch.from_numpy(fused),), attention_mask=torch.from_numpy(fused_mask),
                      decoder_input_ids=torch.from_numpy(prefix), use_cache=False).logits.numpy()
    np.testing.assert_allclose(got, expected, atol=1e-4)
    # the one-member group decodes as if it were alone: the padding is fully masked
    alone = onnx.greedy(*onnx.encode(groups[1]), max_new_tokens=6)
    assert onnx.greedy(fused[1:], fused_mask[1:], max_new_tokens=6) == alone
    assert len(onnx.generate_fused(groups, max_new_tokens=4)) == 2


def test_seq2seq_int8_keeps_the_first_token(exports: dict[str, Path]) -> None:
    assert read_manifest(exports["seq2seq-int8"]).quantized_graphs == ["decoder"]
    texts = random_texts(200, seed=9)
    firsts = []
    for key in ("seq2seq-fp32", "seq2seq-int8"):
        onnx = OnnxSeq2Seq(exports[key], RuntimeSettings(provider="cpu"))
        states, mask = onnx.encode(texts)
        start = np.zeros((len(texts), 1), dtype=np.int64)
        logits = onnx.decoder.run({"decoder_input_ids": start, "encoder_hidden_states": states,
                                   "encoder_attention_mask": mask})[0]
        firsts.append(logits[:, -1].argmax(-1))
    assert (firsts[0] == firsts[1]).mean() >= 0.95


# ------------------------------------------------------------------ served wrappers


async def test_wrappers_satisfy_the_interfaces(exports: dict[str, Path]) -> None:
    embedder = OnnxEmbedder(exports["embed-int8"], RuntimeSettings(provider="cpu"))
    scorer = OnnxPairScorer(exports["nli-int8"], RuntimeSettings(provider="cpu"), "nli")
    assert isinstance(embedder, Embedder) and isinstance(scorer, PairScorer)
    assert embedder.dim == 32
    rows = await embedder.embed(["the tower", "a river flows into the sea"])
    assert rows.shape == (2, 32) and rows.dtype == np.float32
    assert (await embedder.embed([])).shape == (0, 32)
    probs = await scorer.score([("the tower is in paris", "the tower is in london")])
    assert probs.shape == (1, 3) and abs(float(probs.sum()) - 1.0) < 1e-5
    await embedder.aclose()
    await scorer.aclose()


async def test_batched_and_sync_paths_agree(exports: dict[str, Path]) -> None:
    import asyncio

    scorer = OnnxPairScorer(exports["rerank-fp32"], RuntimeSettings(provider="cpu", max_batch=4), "rerank")
    pairs = random_pairs(20, seed=10)
    together = await asyncio.gather(*(scorer.score([p]) for p in pairs))
    np.testing.assert_allclose(np.concatenate(together), scorer.score_sync(pairs), atol=1e-5)
    await scorer.aclose()


def test_wrong_task_is_refused(exports: dict[str, Path]) -> None:
    with pytest.raises(ValueError, match="holds a nli model"):
        OnnxEmbedder(exports["nli-fp32"], RuntimeSettings(provider="cpu"))
    with pytest.raises(ValueError, match="holds a embed model, not rerank"):
        resolve_model(str(exports["embed-fp32"]), "rerank", RuntimeSettings())


# ------------------------------------------------------------------ resolving and caching


def test_resolver_exports_a_checkpoint_once_and_reuses_it(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    first = resolve_model(str(checkpoints["rerank"]), "rerank", settings)
    assert first == cache_dir(str(checkpoints["rerank"]), "rerank", "int8", settings)
    assert read_manifest(first).quantization == "int8"  # pair_quantize default
    stamp = (first / "model.onnx").stat().st_mtime_ns
    assert resolve_model(str(checkpoints["rerank"]), "rerank", settings) == first
    assert (first / "model.onnx").stat().st_mtime_ns == stamp
    # an export dir is used in place; a damaged cache entry is exported again
    assert resolve_model(str(first), "rerank", settings) == first
    (first / "model.onnx").write_bytes(b"broken")
    again = resolve_model(str(checkpoints["rerank"]), "rerank", settings)
    assert again == first and read_manifest(again).files["model.onnx"] == sha256_file(again / "model.onnx")


def test_resolver_quantises_a_cached_fp32_export_without_torch(
    checkpoints: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import onnx_models.export

    settings = settings_for(tmp_path).model_copy(update={"pair_quantize": "none"})
    plain = resolve_model(str(checkpoints["nli"]), "nli", settings)

    def no_export(*args: object, **kwargs: object) -> None:
        raise AssertionError("the int8 model should come from the cached fp32 export")

    monkeypatch.setattr(onnx_models.export, "export_model", no_export)
    int8 = resolve_model(str(checkpoints["nli"]), "nli", settings, quantize="int8")
    assert int8 != plain and read_manifest(int8).quantization == "int8"


def test_a_hub_id_is_exported_into_the_cache(
    exports: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No network here: the exporter is replaced by a copy of a tiny export, to see what the
    resolver asks of it for a hub id."""
    import shutil

    import onnx_models.export

    calls = []

    def fake_export(source: str, task: str, out: Path, quantize: str, max_length: int) -> Path:
        calls.append((source, task, quantize, max_length))
        shutil.copytree(exports["nli-int8"], out)
        return out

    monkeypatch.setattr(onnx_models.export, "export_model", fake_export)
    settings = settings_for(tmp_path)
    first = resolve_model("some-org/some-nli-model", "nli", settings)
    assert first == cache_dir("some-org/some-nli-model", "nli", "int8", settings)
    assert first.name.startswith("some-nli-model-nli-int8-")
    assert resolve_model("some-org/some-nli-model", "nli", settings) == first
    assert calls == [("some-org/some-nli-model", "nli", "int8", 256)]


def test_cache_key_separates_task_quantisation_and_retrained_checkpoints(
    checkpoints: dict[str, Path], tmp_path: Path
) -> None:
    settings = settings_for(tmp_path)
    spec = str(checkpoints["nli"])
    keys = {cache_dir(spec, "nli", q, settings) for q in ("none", "int8")} | {cache_dir(spec, "rerank", "none", settings)}
    assert len(keys) == 3
    before = cache_dir(spec, "nli", "none", settings)
    config = checkpoints["nli"] / "config.json"
    config.write_text(json.dumps(json.loads(config.read_text())), encoding="utf-8")  # a new mtime
    assert cache_dir(spec, "nli", "none", settings) != before


def test_load_pair_scorer_shares_one_instance(exports: dict[str, Path]) -> None:
    clear_models()
    settings = RuntimeSettings(provider="cpu")
    a = load_pair_scorer(str(exports["nli-fp32"]), "nli", settings)
    assert load_pair_scorer(str(exports["nli-fp32"]), "nli", settings) is a
    clear_models()


def test_bundled_spec_points_into_the_package(tmp_path: Path) -> None:
    from onnx_models.sources import BUNDLED_DIRS

    if (BUNDLED_DIRS["nli"] / "manifest.json").is_file():
        assert resolve_model("bundled", "nli", settings_for(tmp_path)) == BUNDLED_DIRS["nli"]
    else:
        with pytest.raises(FileNotFoundError, match="not shipped"):
            resolve_model("bundled", "nli", settings_for(tmp_path))
    with pytest.raises(ValueError, match="no bundled model"):
        resolve_model("bundled", "seq2seq", settings_for(tmp_path))


def test_export_command_writes_an_export(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from middleware.commands.export import register

    app = typer.Typer()
    app.callback()(lambda: None)  # keep subcommands as subcommands
    register(app)
    out = tmp_path / "cli-export"
    result = CliRunner().invoke(app, ["export", "--model", str(checkpoints["nli"]), "--task", "nli",
                                      "--quantize", "int8", "--out", str(out), "--max-length", "32",
                                      "--labels", "attributable,extrapolatory,contradictory"])
    assert result.exit_code == 0, result.output
    manifest = read_manifest(out)
    assert manifest.quantization == "int8" and manifest.max_length == 32
    assert manifest.labels == ["attributable", "extrapolatory", "contradictory"]
    bad = CliRunner().invoke(app, ["export", "--model", "x", "--task", "classify"])
    assert bad.exit_code != 0 and "expected one of" in bad.output


# ------------------------------------------------------------------ precisions by device


def test_an_int8_export_ships_a_weight_only_copy_for_gpus(exports: dict[str, Path]) -> None:
    import onnx

    from onnx_models.weights import is_weight_only

    for task in ("nli", "embed", "seq2seq"):
        manifest = read_manifest(exports[f"{task}-int8"])
        copies = manifest.variants["weights-int8"]
        assert set(copies) == set(manifest.quantized_graphs)
        for role, name in copies.items():
            assert name in manifest.files and name != manifest.graphs[role]
            model = onnx.load(str(exports[f"{task}-int8"] / name))
            assert is_weight_only(model)
            assert not any(n.op_type in ("MatMulInteger", "DynamicQuantizeLinear") for n in model.graph.node)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
async def test_the_weight_only_copy_computes_like_the_fp32_export(exports: dict[str, Path], precision: str) -> None:
    """What a GPU would load (weights folded from int8, fp16 if asked) scores as the fp32 export
    does, closer than dynamic int8 does, and a pair's scores do not depend on its batch."""
    pairs = random_pairs(40, seed=21)
    reference = OnnxPairScorer(exports["nli-fp32"], RuntimeSettings(provider="cpu"), "nli").score_sync(pairs)
    settings = RuntimeSettings(provider="cpu", precision=precision)
    scorer = OnnxPairScorer(exports["nli-int8"], settings, "nli")
    assert scorer.session.path.name == "model.weights-int8.onnx" and scorer.session.precision == precision
    assert not scorer.per_sequence
    folded = scorer.score_sync(pairs)
    dynamic = OnnxPairScorer(exports["nli-int8"], RuntimeSettings(provider="cpu"), "nli").score_sync(pairs)
    assert np.abs(folded - reference).max() < 0.02
    assert np.abs(folded - reference).mean() <= np.abs(dynamic - reference).mean()
    alone = np.stack([scorer.score_sync([pair], 1)[0] for pair in pairs[:6]])
    assert np.abs(alone - folded[:6]).max() < (1e-4 if precision == "fp32" else 2e-3)
    await scorer.aclose()


async def test_served_models_tokenise_in_the_batcher_thread(exports: dict[str, Path]) -> None:
    import threading

    scorer = OnnxPairScorer(exports["nli-fp32"], RuntimeSettings(provider="cpu"), "nli")
    threads: list[int] = []
    encode_pairs = scorer.tokenizer.encode_pairs

    def recording(pairs: list[tuple[str, str]]) -> list[object]:
        threads.append(threading.get_ident())
        return encode_pairs(pairs)

    scorer.tokenizer.encode_pairs = recording  # type: ignore[method-assign]
    await scorer.score(random_pairs(3, seed=5))
    assert threads and threading.get_ident() not in threads
    await scorer.aclose()


def test_the_bundled_verifier_loads_at_each_precision() -> None:
    """The shipped export: int8 on the CPU by default; the weight-only copy a GPU loads gives
    the same decisions at fp32 and fp16 (checked here on the CPU)."""
    from middleware.runtime.precision import choose_graph
    from onnx_models.sources import bundled_export

    directory = bundled_export("bundled", "nli")
    assert directory is not None
    manifest = read_manifest(directory)
    assert choose_graph(directory, manifest, "model", "cpu", "auto").path.name == "model.onnx"
    assert choose_graph(directory, manifest, "model", "cuda", "auto").path.name == "model.weights-int8.onnx"
    pairs = [("The tower was completed in 1889 for the World's Fair.", "The tower was completed in 1889."),
             ("The tower was completed in 1889 for the World's Fair.", "The tower was completed in 1901."),
             ("Marie Curie was born in Warsaw.", "Marie Curie was born in Paris.")]
    fp32 = OnnxPairScorer(directory, RuntimeSettings(provider="cpu", precision="fp32"), "nli").score_sync(pairs)
    fp16 = OnnxPairScorer(directory, RuntimeSettings(provider="cpu", precision="fp16"), "nli").score_sync(pairs)
    assert np.abs(fp32 - fp16).max() < 0.01
    assert list(fp32.argmax(1)) == [0, 2, 2]
