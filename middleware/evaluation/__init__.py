"""Evaluation, kept out of the serving path: each module is named by what it evaluates.

- ``checker``: the whole checker on labelled sentences (``factcheck eval-check``);
- ``grounding``: the grounding prompt's effect on an LLM's answers (``eval-grounding``);
- ``verifier``: the verifier's verdicts on labelled pairs (``eval-verifier``);
- ``battery`` and ``battery_e2e``: verdicts on the third-party dev battery, per dataset
  (``eval-battery``);
- ``editor`` and ``edit_metrics``: the editor's corrections (``eval-edit``);
- ``planted``: the scoring of the planted-error benchmark (``load_tests.quality.planted``);
- ``commands``: the ``eval-*`` commands themselves; ``options``: the options they share with
  the commands whose output they evaluate.
"""
