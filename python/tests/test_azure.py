"""A container as the destination (``az://CONTAINER/PREFIX``), against Azure Blob Storage's
emulator started here: Azurite 3.35.0 (``.ci/setup`` installs it into /opt/azurite), its
container made public by rclone so that what fastwrite wrote is read back by plain HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import TOOL_SECONDS, require_tool, unmet

import fastwrite

AZURITE = "/opt/azurite/bin/azurite-blob"
ACCOUNT = "devstoreaccount1"
# Azurite's account key, which is public (Microsoft's documentation gives it).
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


class Azurite:
    def __init__(self, root: Path) -> None:
        if not os.path.exists(AZURITE):
            unmet(f"{AZURITE} is not there (.ci/setup installs Azurite 3.35.0)")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}/{ACCOUNT}"
        self.process = subprocess.Popen(
            [AZURITE, "--disableTelemetry", "--inMemoryPersistence", "--silent"]
            + ["--blobHost", "127.0.0.1", "--blobPort", str(self.port)],
            cwd=root,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        start = time.monotonic()
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert self.process.poll() is None, "Azurite ended before it answered"
                assert time.monotonic() - start < 60, "Azurite did not answer within 60 s"
                time.sleep(0.05)

    def make_container(self, name: str) -> None:
        rclone = require_tool("rclone")
        env = {k: v for k, v in os.environ.items() if not k.startswith("RCLONE_")} | {
            "RCLONE_CONFIG": "/dev/null",
            "RCLONE_CONFIG_AZ_TYPE": "azureblob",
            "RCLONE_CONFIG_AZ_USE_EMULATOR": "true",
            "RCLONE_CONFIG_AZ_ACCOUNT": ACCOUNT,
            "RCLONE_CONFIG_AZ_KEY": KEY,
            "RCLONE_CONFIG_AZ_ENDPOINT": self.endpoint,
        }
        subprocess.run(
            [rclone, "mkdir", "--azureblob-public-access", "container", f"az:{name}"],
            env=env,
            check=True,
            capture_output=True,
            timeout=TOOL_SECONDS,
        )

    def metadata(self, container: str, blob: str) -> dict[str, str]:
        request = urllib.request.Request(f"{self.endpoint}/{container}/{blob}", method="HEAD")
        with urllib.request.urlopen(request, timeout=TOOL_SECONDS) as answer:
            return {
                k.lower()[len("x-ms-meta-") :]: v
                for k, v in answer.headers.items()
                if k.lower().startswith("x-ms-meta-")
            }


@pytest.fixture
def azure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Azurite]:
    server = Azurite(tmp_path)
    for name in [k for k in os.environ if k.startswith("AZURE")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv(
        "AZURE_STORAGE_CONNECTION_STRING",
        f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
        f"BlobEndpoint={server.endpoint};",
    )
    try:
        server.make_container("bench")
        yield server
    finally:
        server.process.kill()
        server.process.wait()


def test_extract_a_batch_and_an_existing_key_in_a_container(tmp_path: Path, azure: Azurite) -> None:
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as z:
        info = zipfile.ZipInfo("dir/a.txt", (2020, 1, 2, 3, 4, 6))
        info.external_attr = 0o100640 << 16
        z.writestr(info, b"alpha")
    assert fastwrite.extract(archive, "az://bench/x/").files == 1
    with fastwrite.Batch("az://bench/b") as batch:
        batch.write("c/d.txt", b"delta", mode=0o600, mtime=1_700_000_000.5)
    assert azure.metadata("bench", "x/dir/a.txt")["mode"] == str(0o100640)
    # On Azure rclone writes and reads `mtime` in RFC 3339, and so does fastwrite.
    assert azure.metadata("bench", "b/c/d.txt") == {
        "mode": str(0o100600),
        "mtime": "2023-11-14T22:13:20.500Z",
    }
    with pytest.raises(fastwrite.ErrorGroup) as caught:
        fastwrite.extract(archive, "az://bench/x")
    [error] = caught.value.errors
    assert isinstance(error, FileExistsError)
    assert error.key == "az://bench/x/dir/a.txt"
    # And back down, with the mode its metadata records.
    report = fastwrite.mirror("az://bench/x/", tmp_path / "down")
    assert report.files == 1
    copy = tmp_path / "down" / "dir" / "a.txt"
    assert copy.read_bytes() == b"alpha"
    assert copy.stat().st_mode & 0o7777 == 0o640
    # Every folder a marker with its mode and time, when asked.
    fastwrite.extract(archive, "az://bench/m/", folder_markers=True)
    assert azure.metadata("bench", "m/dir/")["mode"] == str(0o040755)
    # A container that is not there: the run cannot start, said with Azure's code.
    with pytest.raises(fastwrite.Error) as missing:
        fastwrite.extract(archive, "az://nosuch/p")
    assert "ContainerNotFound" in str(missing.value)
    assert missing.value.code == "ContainerNotFound"
