"""What fails for real reaches Python, named: a close that fails on the lab's FUSE mount (as NFS
reports a failed write-back), a full disk, Ctrl-C in the middle of a run."""

from __future__ import annotations

import errno
import io
import os
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Callable

import pytest
from conftest import REPO, require_tool, unmet

import fastwrite


def test_a_failed_close_on_the_lab_mount_names_its_file(slowfs: Callable[..., Path]) -> None:
    mnt = slowfs("flush=1", "fail_flush=bad")
    out = mnt / "out"
    with pytest.raises(fastwrite.ErrorGroup) as caught:
        with fastwrite.Batch(out, close="deferred") as batch:
            for i in range(60):
                batch.write(f"f{i}.txt", b"x" * i)
            batch.write("sub/bad.txt", b"lost on close")
    [error] = caught.value.errors
    assert (error.kind, error.path, error.errno) == ("close", "sub/bad.txt", errno.EIO)
    assert error.filename == str(out / "sub" / "bad.txt")
    assert not (out / "sub" / "bad.txt").exists()  # nothing unverified under its name
    assert len([n for n in os.listdir(out) if n.startswith("f")]) == 60
    assert caught.value.report is not None and caught.value.report.files == 60


def test_a_failed_close_while_extracting_on_the_lab_mount(
    slowfs: Callable[..., Path], tmp_path: Path
) -> None:
    mnt = slowfs("flush=1", "fail_flush=bad")
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for i in range(30):
            z.writestr(f"ok/{i}.txt", b"fine")
        z.writestr("x/bad.bin", b"lost")
    with pytest.raises(fastwrite.ErrorGroup) as caught:
        fastwrite.extract(archive, mnt / "out")
    assert [(e.kind, e.path) for e in caught.value.errors] == [("close", "x/bad.bin")]
    assert not (mnt / "out" / "x" / "bad.bin").exists()
    assert len(os.listdir(mnt / "out" / "ok")) == 30


def test_a_full_disk(tmpfs: Callable[[str], Path]) -> None:
    disk = tmpfs("1m")
    with pytest.raises(fastwrite.ErrorGroup) as caught, fastwrite.Batch(disk / "out") as batch:
        for i in range(8):
            batch.write(f"big{i}.bin", os.urandom(256 * 1024))
    full = [e for e in caught.value.errors if e.errno == errno.ENOSPC]
    assert full and all(e.kind in ("write", "close") and e.path.startswith("big") for e in full)
    # What failed left nothing under its name; what is there is whole.
    for name in os.listdir(disk / "out") if (disk / "out").exists() else []:
        assert (disk / "out" / name).stat().st_size == 256 * 1024


def test_a_zip_too_big_for_the_disk_is_refused_before_writing(
    tmpfs: Callable[[str], Path], tmp_path: Path
) -> None:
    disk = tmpfs("1m")
    archive = tmp_path / "big.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("zeros.bin", bytes(4 << 20))
    with pytest.raises(fastwrite.Error) as caught:
        fastwrite.extract(archive, disk / "out")
    assert caught.value.kind == "start" and "space_check=False" in str(caught.value)
    assert not (disk / "out").exists()


def _lab() -> str:
    if sys.platform != "linux":
        pytest.skip("the close-latency lab is an LD_PRELOAD library for Linux")
    require_tool("cc")
    built = subprocess.run([REPO / "lab" / "build"], capture_output=True, text=True)
    if built.returncode != 0:
        unmet(f"lab/build failed: {built.stderr}")
    return built.stdout.strip().splitlines()[-1]


# The child takes Ctrl-C as a terminal's user would have it: started by a shell without job
# control in the background (`tests &` in a script, nohup), it inherits SIGINT ignored, and
# Python then leaves it ignored, so the test would pass or fail by how it was launched.
SCRIPT = """
import signal, sys, time, os, fastwrite
signal.signal(signal.SIGINT, signal.default_int_handler)
mode, out = sys.argv[1], sys.argv[2]
start = time.monotonic()
try:
    if mode == "extract":
        fastwrite.extract(sys.argv[3], out, threads=1, close="inline")
    else:
        with fastwrite.Batch(out, writers=1, close="inline") as batch:
            for i in range(3000):
                batch.write(f"f{i}", b"x" * 1000)
            print("handed over", flush=True)
except KeyboardInterrupt as e:
    print("interrupted after", round(time.monotonic() - start, 1), "s;",
          len(getattr(e, "fastwrite_errors", ["missing"])), "errors", flush=True)
    sys.exit(3)
print("finished", flush=True)
"""


@pytest.mark.parametrize("mode", ["extract", "batch"])
def test_ctrl_c_cancels_the_run_cleanly(tmp_path: Path, mode: str) -> None:
    lab = _lab()
    archive = tmp_path / "many.tar"
    with tarfile.open(archive, "w") as t:
        for i in range(3000):
            info = tarfile.TarInfo(f"f{i}")
            info.size = 1000
            t.addfile(info, io.BytesIO(b"x" * 1000))
    out = tmp_path / "out"
    env = dict(os.environ, LD_PRELOAD=lab, FASTWRITE_LAB_CLOSE_MS="5")
    child = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, mode, str(out), str(archive)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.5)  # 3000 closes of 5 ms each take 15 s: the run is well under way
    assert child.poll() is None, child.communicate()
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    stdout, stderr = child.communicate(timeout=60)
    waited = time.monotonic() - sent
    assert child.returncode == 3, (stdout, stderr)
    assert "interrupted after" in stdout and "0 errors" in stdout, (stdout, stderr)
    assert waited < 5, f"the run took {waited:.1f} s to stop"
    # Part of the run, each file whole, put in place; no temporary or staging names left.
    written = os.listdir(out)
    assert 0 < len(written) < 3000
    assert all((out / n).stat().st_size == 1000 for n in written), written
    assert not [n for n in os.listdir(tmp_path) if "fastwrite" in n]
