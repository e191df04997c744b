"""NumPy's linear algebra on the calling thread only, for the API's small reads.

NumPy's wheels bundle OpenBLAS, which splits every BLAS call over all cores. For a
512 x 512 ``eigh`` (hundreds of small level-2 calls in the tridiagonal reduction) on a
machine whose cores are busy, the threads' hand-offs cost far more than the arithmetic:
1-7 s instead of ~0.1 s on one thread (bench/results/recording_open.md). OpenBLAS 0.3.27+
has a per-thread limit, ``openblas_set_num_threads_local``; ``one_blas_thread`` sets it to 1
for a block and restores it. Where that symbol is not found (another BLAS, an older
OpenBLAS) it changes nothing.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np


@functools.cache
def _set_local_threads() -> Callable[[int], int] | None:
    """OpenBLAS's ``openblas_set_num_threads_local`` of NumPy's bundled library, if any."""
    libs = Path(os.path.dirname(np.__file__)).parent / "numpy.libs"
    for path in sorted(libs.glob("lib*openblas*.so*")):
        try:
            function = ctypes.CDLL(str(path)).openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        function.argtypes = [ctypes.c_int]
        function.restype = ctypes.c_int
        return function
    return None


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS calls made by this thread inside the block run on this thread alone."""
    set_local = _set_local_threads()
    if set_local is None:
        yield
        return
    previous = set_local(1)
    try:
        yield
    finally:
        set_local(previous)
