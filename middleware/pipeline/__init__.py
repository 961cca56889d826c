"""The per-sentence fact-checking pipeline.

Modules, by stage:
- ``slots`` (with ``quantities``, ``dates``, ``names``): checkable slots of a sentence, normalised
- ``checkworthy``: skip questions, greetings, instructions, hedges, meta text; mark subjective
- ``decontext``: make a sentence stand alone (spaCy heuristics or an LLM)
- ``cqgen``: verification questions (slots, llm, seq2seq)
- ``verifiers``: attributable / extrapolatory / contradictory (slots, nli, hybrid, llm)
- ``stages``: the timed stage functions the checker calls; ``factory``: backends by name
- ``commands``: ``factcheck verify`` (evaluated by ``factcheck eval-verifier``, ``middleware.training``)
"""
