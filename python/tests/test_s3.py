"""A bucket as the destination (``s3://BUCKET/PREFIX``), against a real S3 server started here:
versitygw (``.ci/setup`` installs it), read back with the aws CLI."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, TOOL_SECONDS, require_tool

import fastwrite


class Server:
    def __init__(self, root: Path) -> None:
        binary = require_tool("versitygw")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        (root / "data").mkdir()
        self.env = {
            "AWS_ACCESS_KEY_ID": "fastwrite",
            "AWS_SECRET_ACCESS_KEY": "fastwrite-secret",
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{self.port}",
            "AWS_CONFIG_FILE": "/dev/null",
            "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        }
        self.process = subprocess.Popen(
            [binary, "--access", "fastwrite", "--secret", "fastwrite-secret"]
            + ["--port", f"127.0.0.1:{self.port}", "--keep-alive", "posix", str(root / "data")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        start = time.monotonic()
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert self.process.poll() is None, "versitygw ended before it answered"
                assert time.monotonic() - start < 60, "versitygw did not answer within 60 s"
                time.sleep(0.05)

    def aws(self, *args: str) -> object:
        require_tool("aws")
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | self.env
        done = subprocess.run(
            ["aws", "s3api", "--output", "json", *args],
            env=env,
            check=True,
            capture_output=True,
            timeout=TOOL_SECONDS,
        )
        return json.loads(done.stdout) if done.stdout.strip() else None

    def keys(self, bucket: str) -> list[str]:
        listed = self.aws("list-objects-v2", "--bucket", bucket)
        assert isinstance(listed, dict)
        return sorted(o["Key"] for o in listed.get("Contents", []))

    def metadata(self, bucket: str, key: str) -> dict[str, str]:
        head = self.aws("head-object", "--bucket", bucket, "--key", key)
        assert isinstance(head, dict)
        return dict(head["Metadata"])


@pytest.fixture
def s3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    server = Server(tmp_path)
    for name in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)
    for name, value in server.env.items():
        monkeypatch.setenv(name, value)
    server.aws("create-bucket", "--bucket", "bench")
    try:
        yield server
    finally:
        server.process.kill()
        server.process.wait()


def test_extract_and_a_batch_write_into_a_bucket(tmp_path: Path, s3: Server) -> None:
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as z:
        info = zipfile.ZipInfo("dir/a.txt", (2020, 1, 2, 3, 4, 6))
        info.external_attr = 0o100640 << 16
        z.writestr(info, b"alpha")
    report = fastwrite.extract(archive, "s3://bench/x/")
    assert report.files == 1
    with fastwrite.Batch("s3://bench/b") as batch:
        batch.write("c/d.txt", b"delta", mode=0o600, mtime=1_700_000_000.5)
    assert s3.keys("bench") == ["b/c/d.txt", "x/dir/a.txt"]
    assert s3.metadata("bench", "x/dir/a.txt")["mode"] == str(0o100640)
    assert s3.metadata("bench", "b/c/d.txt") == {"mode": str(0o100600), "mtime": "1700000000.5"}


def test_an_existing_key_is_a_file_exists_error_with_its_key(tmp_path: Path, s3: Server) -> None:
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("a.txt", b"alpha")
    fastwrite.extract(archive, "s3://bench/p")
    with pytest.raises(fastwrite.ErrorGroup) as caught:
        fastwrite.extract(archive, "s3://bench/p")
    [error] = caught.value.errors
    assert isinstance(error, FileExistsError)
    assert error.key == "s3://bench/p/a.txt"
    assert error.filename is None and error.path == "a.txt"


def test_an_archive_at_a_url_and_a_prefix_are_read_from_where_they_live(
    tmp_path: Path, s3: Server
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    archive = site / "a.zip"
    with zipfile.ZipFile(archive, "w") as z:
        info = zipfile.ZipInfo("dir/a.txt", (2020, 1, 2, 3, 4, 6))
        info.external_attr = 0o100640 << 16
        z.writestr(info, b"alpha")
    server = subprocess.Popen(
        ["python3", str(REPO / "lab" / "range-server.py"), str(site)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().split()[-1])
        report = fastwrite.extract(f"http://127.0.0.1:{port}/a.zip", tmp_path / "web")
        assert report.files == 1
        assert (tmp_path / "web" / "dir" / "a.txt").read_bytes() == b"alpha"
        with pytest.raises(FileNotFoundError):
            fastwrite.extract(f"http://127.0.0.1:{port}/nope.zip", tmp_path / "none")
    finally:
        server.kill()
        server.wait()
    # A prefix down into a folder, with the mode its metadata records.
    fastwrite.extract(archive, "s3://bench/m/")
    report = fastwrite.mirror("s3://bench/m/", tmp_path / "down")
    assert report.files == 1
    copy = tmp_path / "down" / "dir" / "a.txt"
    assert copy.read_bytes() == b"alpha"
    assert copy.stat().st_mode & 0o7777 == 0o640
    assert fastwrite.mirror("s3://bench/m/", tmp_path / "down").files == 0
