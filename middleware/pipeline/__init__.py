"""The per-sentence fact-checking pipeline (built by ``middleware.composition.pipeline``).

Modules, by stage:
- ``slots`` (with ``quantities``, ``dates``, ``names``, ``lexicon``): checkable slots of a
  sentence, normalised;
- ``checkworthy``: skip questions, greetings, instructions, hedges, meta text; mark subjective;
- ``decontext``: make a sentence stand alone (spaCy heuristics or an LLM);
- ``cqgen``: verification questions (slots, llm, seq2seq); ``prompts``: the LLM backends' prompts;
- ``alignment``: the evidence sentences closest to a claim; ``excerpts``: bounded evidence in reports;
- ``verifiers``: attributable / extrapolatory / contradictory (slots, nli, hybrid, llm);
- ``editing``: the ``Editor`` interface the checker calls in correct mode (the editors are
  ``middleware.revise``); ``fava`` and ``tagging``: FAVA hallucination tags and markup;
- ``attribution``: the stream's attribution report; ``memory``, ``closed_book``: the
  memory-hallucination signal from the upstream's closed-book answer;
- ``stages``: the timed stage functions the checker calls; ``factchecker``: the checker itself.
"""
