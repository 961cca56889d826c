"""Evidence: the local index (BM25 + dense vectors, fused), passages, relevance ranking and
the QUIP Data Portrait of the indexed corpus."""
