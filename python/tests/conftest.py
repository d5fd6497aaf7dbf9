"""Fixtures of the Python package's tests: the repository's data, trees to compare, and the
lab's FUSE mount. A test whose prerequisite is missing (a tool, root for a mount) is skipped
with its reason, and fails instead under CI (CI=true), as the Rust tests' harness does."""

from __future__ import annotations

import os
import resource
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"


def unmet(reason: str) -> None:
    """A prerequisite is missing: skipped here, a failure under CI."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"prerequisite missing under CI: {reason}")
    pytest.skip(reason)


def require_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        unmet(f"{name} is not installed (.ci/setup installs it)")
    return path  # type: ignore[return-value]


# What a tool the tests start may take: a tool's trouble must neither hang the suite nor fill
# the machine (as the Rust harness bounds them: tests/common/run.rs).
TOOL_SECONDS = 180
TOOL_MEMORY = 1 << 30


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (TOOL_MEMORY, TOOL_MEMORY))


def run(*args: object, cwd: object = None) -> None:
    subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        check=True,
        capture_output=True,
        timeout=TOOL_SECONDS,
        preexec_fn=_bounded,
    )


def tree(root: Path) -> dict[str, object]:
    """Every entry under root: a file's content and permission bits, a link's target, a
    directory as itself."""
    found: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = ("dir",)
            else:
                found[rel] = ("file", path.read_bytes(), stat.S_IMODE(st.st_mode))
    return found


def sample_tree(root: Path, files: int = 40) -> Path:
    """A small tree of nested files, an empty folder, an executable and a symlink."""
    for i in range(files):
        path = root / f"d{i % 4}" / f"sub{i % 3}" / f"f{i}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"file {i}\n".encode() * (i + 1))
    (root / "empty").mkdir()
    script = root / "run.sh"
    script.write_bytes(b"#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    os.symlink("d0/sub0/f0.txt", root / "link")
    return root


class Slowfs:
    """The lab's FUSE filesystem (lab/slowfs), mounted for one test."""

    def __init__(self, mnt: Path, *options: str) -> None:
        if sys.platform != "linux":
            pytest.skip("the lab's FUSE filesystem is Linux's")
        if subprocess.run([REPO / "lab" / "slowfs", "check"], capture_output=True).returncode != 0:
            unmet("the lab's FUSE filesystem needs root, /dev/fuse, fuse3 and libfuse3-dev")
        self.mnt = mnt
        run(REPO / "lab" / "slowfs", "up", mnt, *options)

    def down(self) -> None:
        subprocess.run([REPO / "lab" / "slowfs", "down", self.mnt], capture_output=True)


@pytest.fixture
def slowfs(tmp_path: Path) -> Iterator[object]:
    """A function mounting the lab's FUSE filesystem with options (``flush=1``,
    ``fail_flush=bad``); every mount is taken down after the test."""
    mounts: list[Slowfs] = []

    def mount(*options: str) -> Path:
        fs = Slowfs(tmp_path / f"mnt{len(mounts)}", *options)
        mounts.append(fs)
        return fs.mnt

    yield mount
    for fs in mounts:
        fs.down()


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[object]:
    """A function mounting a tmpfs of a given size (a disk that fills), unmounted after."""
    mounts: list[Path] = []

    def mount(size: str) -> Path:
        if sys.platform != "linux" or os.geteuid() != 0:
            unmet("mounting a tmpfs needs root on Linux")
        require_tool("mount")
        mnt = tmp_path / f"disk{len(mounts)}"
        mnt.mkdir()
        run("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", mnt)
        mounts.append(mnt)
        return mnt

    yield mount
    for mnt in mounts:
        subprocess.run(["umount", "-l", mnt], capture_output=True)


# `except*` is a syntax error before Python 3.11.
collect_ignore = [] if sys.version_info >= (3, 11) else ["test_groups_311.py"]
