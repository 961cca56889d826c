"""Text cutting shared by every stage: the streamed answer's sentences
(``answer_segmenter``), the evidence passages' sentences (``evidence_sentences``) and the
process's one spaCy pipeline (``nlp``)."""
