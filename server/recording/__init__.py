"""Activation recordings of runs' checkpoints: the job that records (``job``, in a
spawned child), its chunked rollout (``rollout``), the files (``storage``) and the runner
that takes queued recordings one at a time (``runner``)."""
