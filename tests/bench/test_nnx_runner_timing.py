"""``bench.nnx_runner``'s steady rate leaves out the calls a background compile ran beside."""

from __future__ import annotations

import threading

import pytest

from bench.nnx_runner import _HostLog, summarize_timing
from nnx_ppo.algorithms.compile_ahead import THREAD_NAME


def test_the_steady_rate_leaves_out_calls_beside_a_compile():
    # Call 1 shared the CPU with a compile: twice as slow as calls 2 and 3.
    timing = summarize_timing([100, 100, 100, 100], [5.0, 2.0, 1.0, 1.0], [True, False, True, True])
    assert timing["env_steps_per_second"] == pytest.approx(100.0)
    assert timing["train_compile_seconds"] == pytest.approx(4.0)
    every = summarize_timing([100, 100, 100, 100], [5.0, 2.0, 1.0, 1.0])
    assert every["env_steps_per_second"] == pytest.approx(75.0)
    # No steady call left: every call after the first counts.
    only = summarize_timing([100, 100], [5.0, 2.0], [True, False])
    assert only["env_steps_per_second"] == pytest.approx(50.0)


def test_the_log_marks_the_calls_that_began_or_ended_beside_a_compile():
    log = _HostLog(t0=0.0)
    release = threading.Event()
    compile_thread = threading.Thread(target=release.wait, name=THREAD_NAME)
    log.on_metrics({"throughput/env_steps_per_second": 10.0}, 10)  # nothing compiling
    compile_thread.start()
    log.on_metrics({"throughput/env_steps_per_second": 10.0}, 20)  # ends beside it
    release.set()
    compile_thread.join()
    log.on_metrics({"throughput/env_steps_per_second": 10.0}, 30)  # began beside it
    log.on_metrics({"throughput/env_steps_per_second": 10.0}, 40)
    assert [c.beside_compile for c in log.calls] == [False, True, True, False]
