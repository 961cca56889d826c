"""Alignment of a claim with the evidence sentences: embeddings cached, a sentence repeated across
passages taken once."""

from __future__ import annotations

from middleware.pipeline.alignment import Aligner, sentences_of_passages
from middleware.pipeline.verifiers import passages_from_texts
from tests.support.pipeline_doubles import HashingEmbedder
from tests.middleware.pipeline.verifiers.test_slots_verifier import CURIE


async def test_alignment_caches_embeddings() -> None:
    embedder = HashingEmbedder()
    aligner = Aligner(embedder)
    sentences = sentences_of_passages(passages_from_texts([CURIE]))
    first = await aligner.align("Curie was born in Warsaw.", sentences)
    await aligner.align("Curie was born in Warsaw.", sentences)
    assert len(embedder.calls) == 1
    assert first[0].sentence.text.startswith("Marie Curie was born")
    assert first[0].score > first[-1].score


async def test_alignment_takes_a_repeated_sentence_once() -> None:
    sentence = "The canal is about 193 kilometres long."
    passages = passages_from_texts([f"{sentence} It has no locks.", f"It opened in 1869. {sentence}"])
    aligned = await Aligner().align("The canal is 193 kilometres long.", sentences_of_passages(passages), 4)
    texts = [a.sentence.text for a in aligned]
    assert texts.count(sentence) == 1 and len(texts) == 3
    assert aligned[0].sentence.passage_index == 0
