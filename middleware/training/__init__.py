"""Training of the project's models, run by ``factcheck train-verifier``, ``calibrate-verifier``,
``fit-combiner``, ``make-edit-data`` and ``train-editor`` (``middleware.commands.train`` and
``.edit``); evaluating them is ``middleware.evaluation``.

- the NLI verifier: its pairs and dev split (``verifier_data``), synthetic pairs
  (``synthetic``), the fine-tuning loop (``verifier``), its metrics (``metrics``), decision
  thresholds (``calibration``), the rules' combiner (``combiner``) and the shipped export
  (``shipping``);
- the seq2seq editor: PURR-style data (``editor_data``) and its fine-tuning (``editor``);
- shared by both: sentence corruption (``corruption``) and the third-party sets' readers
  (``claim_sets``)."""

from middleware.types import NLI_HEAD_LABELS

ENTAILMENT, NEUTRAL, CONTRADICTION = (NLI_HEAD_LABELS.index(x) for x in ("entailment", "neutral", "contradiction"))
"""Target ids of the head's three classes: positions in ``middleware.types.NLI_HEAD_LABELS``,
the label vocabulary the training data, the export's manifest and the runtime share."""
