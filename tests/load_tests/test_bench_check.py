"""bench_check's cost figure: the process's CPU time, every thread counted."""

from __future__ import annotations

import threading
import time

from load_tests.bench_check import _shift_numbers, process_cpu_s


def _spin(cpu_seconds: float) -> None:
    """Busy until this thread has used ``cpu_seconds`` of CPU (however loaded the machine is)."""
    end = time.thread_time() + cpu_seconds
    while time.thread_time() < end:
        pass


def test_cpu_time_counts_work_in_other_threads_and_not_sleep() -> None:
    before = process_cpu_s()
    time.sleep(0.2)
    assert process_cpu_s() - before < 0.1
    before = process_cpu_s()
    worker = threading.Thread(target=_spin, args=(0.25,))
    worker.start()
    worker.join()
    assert process_cpu_s() - before >= 0.2


def test_the_cold_pass_changes_every_year_so_caches_cannot_answer() -> None:
    assert _shift_numbers("Completed in 1889, restored in 2014.", 20) == "Completed in 1909, restored in 2034."
