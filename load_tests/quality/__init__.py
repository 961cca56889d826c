"""Quality benchmarks of the fact-checking pipeline on hand-written data (see README.md)."""
