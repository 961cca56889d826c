"""Where checks run when they do not run in the relay's process: check worker processes on
this machine (``check.workers``), each with its own models, fed over a pipe by the relay.
``pool.WorkerPool`` is the relay's side (a ``Checker``), ``worker`` the process's."""
