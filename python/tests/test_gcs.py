"""Google Cloud Storage (``gs://BUCKET/PREFIX``) as far as its emulator serves it:
fake-gcs-server v1.56.1 (``.ci/setup`` builds it), reached through ``STORAGE_EMULATOR_HOST`` as
Google's libraries reach one. It takes none of the XML API's uploads that fastwrite sends, so
what is tested here is what comes out of a bucket: objects are planted through its JSON API."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import TOOL_SECONDS, require_tool

import fastwrite


class FakeGcs:
    def __init__(self) -> None:
        server = require_tool("fake-gcs-server")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [server, "-scheme", "http", "-host", "127.0.0.1", "-port", str(self.port)]
            + ["-backend", "memory", "-log-level", "error"]
            + ["-public-host", "127.0.0.1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        start = time.monotonic()
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert self.process.poll() is None, "fake-gcs-server ended before it answered"
                assert time.monotonic() - start < 60, "fake-gcs-server did not answer in 60 s"
                time.sleep(0.05)

    def _send(self, path: str, body: bytes, content_type: str) -> None:
        request = urllib.request.Request(
            self.endpoint + path, data=body, headers={"content-type": content_type}
        )
        with urllib.request.urlopen(request, timeout=TOOL_SECONDS) as answer:
            assert answer.status == 200

    def make_bucket(self, name: str) -> None:
        self._send("/storage/v1/b", json.dumps({"name": name}).encode(), "application/json")

    def put(self, bucket: str, key: str, data: bytes, metadata: dict[str, str]) -> None:
        resource = json.dumps({"name": key, "metadata": metadata})
        body = (
            (
                f"--B\r\ncontent-type: application/json\r\n\r\n{resource}\r\n"
                "--B\r\ncontent-type: application/octet-stream\r\n\r\n"
            ).encode()
            + data
            + b"\r\n--B--\r\n"
        )
        path = f"/upload/storage/v1/b/{bucket}/o?uploadType=multipart"
        self._send(path, body, "multipart/related; boundary=B")


@pytest.fixture
def gcs(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGcs]:
    server = FakeGcs()
    for name in [k for k in os.environ if k.startswith("GOOGLE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"127.0.0.1:{server.port}")
    try:
        server.make_bucket("bench")
        yield server
    finally:
        server.process.kill()
        server.process.wait()


def test_an_archive_and_a_prefix_come_out_of_a_bucket(tmp_path: Path, gcs: FakeGcs) -> None:
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as z:
        info = zipfile.ZipInfo("dir/a.txt", (2020, 1, 2, 3, 4, 6))
        info.external_attr = 0o100640 << 16
        z.writestr(info, b"alpha")
    gcs.put("bench", "in/a.zip", archive.read_bytes(), {})
    assert fastwrite.extract("gs://bench/in/a.zip", tmp_path / "out").files == 1
    assert (tmp_path / "out" / "dir" / "a.txt").read_bytes() == b"alpha"
    assert [e.name for e in fastwrite.list("gs://bench/in/a.zip")] == ["dir/a.txt"]
    # gsutil's mtime, read back as rclone's is.
    gcs.put("bench", "p/b.txt", b"beta", {"goog-reserved-file-mtime": "1500000000"})
    report = fastwrite.mirror("gs://bench/p/", tmp_path / "down")
    assert report.files == 1
    assert (tmp_path / "down" / "b.txt").stat().st_mtime == 1_500_000_000
    # A bucket that is not there: said with the store's code.
    with pytest.raises(fastwrite.Error) as missing:
        fastwrite.mirror("gs://nosuch/p", tmp_path / "none")
    assert missing.value.code == "NoSuchBucket"
    with pytest.raises(FileNotFoundError):
        fastwrite.extract("gs://bench/in/none.zip", tmp_path / "none")
