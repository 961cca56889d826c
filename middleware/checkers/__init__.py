"""Checkers that wrap where the checks run, for the composition root to choose from:

- check worker processes on this machine (``check.workers``), each with its own models, fed
  over a pipe by the relay: ``pool.WorkerPool`` is the relay's side (a ``Checker``),
  ``worker`` the process's, ``channel`` the pipe's framing;
- ``tier_guard.TierGuardedChecker``: the pipeline with its models on the Ray Serve tier, a
  check that a tier failure touched reported ``unverified``."""
