"""``factcheck verify``: the record format, and a stream of records answered in order with bad lines
reported."""

from __future__ import annotations

import io
import json

from middleware.commands.verify import _verify_stream, verify_record
from middleware.types import NLI_LABELS
from tests.middleware.pipeline.verifiers.test_slots_verifier import CURIE, TOWER, _slots_verifier


async def test_verify_record_format() -> None:
    record = {
        "claim": "He was born in Paris.",
        "evidence": ["Rome is old.", CURIE],
        "context": "Marie Curie was a physicist.",
    }
    out = await verify_record(_slots_verifier(), record)
    assert set(out) == {"label", "scores", "evidence_index", "span"}
    assert out["label"] == "contradictory" and out["evidence_index"] == 1
    assert record["claim"][out["span"][0] : out["span"][1]] == "Paris"
    assert list(out["scores"]) == list(NLI_LABELS)


async def test_verify_stream_keeps_order_and_reports_bad_lines() -> None:
    lines = [
        json.dumps({"claim": "Marie Curie was born in Warsaw in 1867.", "evidence": [CURIE]}),
        "{not json",
        json.dumps({"claim": "The Eiffel Tower is 300 metres tall.", "evidence": [TOWER]}),
        json.dumps({"claim": 3, "evidence": []}),
    ]
    sink = io.StringIO()
    errors = await _verify_stream(_slots_verifier(), io.StringIO("\n".join(lines) + "\n"), sink)
    out = [json.loads(x) for x in sink.getvalue().splitlines()]
    assert [o["label"] for o in out] == ["attributable", None, "contradictory", None] and errors == 2
