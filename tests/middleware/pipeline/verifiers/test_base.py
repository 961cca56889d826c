"""What every verifier shares (``middleware.pipeline.verifiers.base``): passages from plain texts,
and a detailed verdict sent on the wire as a plain one."""

from __future__ import annotations

from middleware.pipeline.verifiers import passages_from_texts
from middleware.types import Passage
from tests.middleware.pipeline.verifiers.test_slots_verifier import _slots_verifier


def test_passages_from_texts() -> None:
    passages = passages_from_texts(["a", "b"])
    assert [p.id for p in passages] == ["0", "1"] and all(isinstance(p, Passage) for p in passages)


def test_detailed_verdict_goes_on_the_wire_as_a_plain_verdict() -> None:
    from middleware.pipeline.verifiers import Mismatch
    from middleware.types import SentenceReport

    verdict = _slots_verifier().judge("x", [])
    verdict.mismatches = [Mismatch(kind="date", span=(0, 1), text="x", replacement="y", evidence_index=0)]
    wire = SentenceReport(index=0, start=0, end=1, text="x", verdict=verdict).model_dump()["verdict"]
    assert set(wire) == {"label", "scores", "evidence_id", "evidence_sentence", "span", "reason", "backend", "rules"}
