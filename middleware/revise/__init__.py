"""Revision: minimal, evidence-grounded edits of contradicted or unsupported sentences
(correct mode), with offline (slots), RARR (llm) and PURR-style (seq2seq) editors
(``editors``) behind the pipeline's ``Editor`` interface (``middleware.pipeline.editing``),
the edit buffer (``edits``), the RARR guards (``guards``) and the edit gate (``gate``,
``gate_rules``). The editors are built by ``middleware.composition.editor``; FAVA markup is
``middleware.pipeline.fava``; edit-quality metrics are ``middleware.evaluation.edit_metrics``."""
