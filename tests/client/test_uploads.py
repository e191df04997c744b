"""A file's upload (``nnx_ppo.client.uploads``): its chunks are the file, its headers carry
the SHA-256 and the length the service checks."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from nnx_ppo.client.uploads import CHUNK, file_chunks, upload_headers


def test_a_file_of_several_chunks_is_sent_whole_with_its_digest(tmp_path: Path) -> None:
    data = os.urandom(2 * CHUNK + 123)
    file = tmp_path / "checkpoint.tar.gz"
    file.write_bytes(data)
    chunks = list(file_chunks(file))
    assert [len(c) for c in chunks] == [CHUNK, CHUNK, 123]
    assert b"".join(chunks) == data
    assert upload_headers(file) == {
        "X-Content-SHA256": hashlib.sha256(data).hexdigest(),
        "Content-Type": "application/octet-stream",
        "Content-Length": str(len(data)),
    }


def test_an_empty_file_has_no_chunks_and_the_empty_digest(tmp_path: Path) -> None:
    file = tmp_path / "empty.mp4"
    file.write_bytes(b"")
    assert list(file_chunks(file)) == []
    assert upload_headers(file)["X-Content-SHA256"] == hashlib.sha256(b"").hexdigest()
    assert upload_headers(file)["Content-Length"] == "0"
