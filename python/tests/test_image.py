"""Container images through the Python package: an OCI layout (built by lab/image.py, as the
Rust tests build theirs) applied and listed by its name, as the command line takes it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import fastwrite

LAB = Path(__file__).resolve().parents[2] / "lab"


def layout(tmp_path: Path) -> Path:
    spec = {
        "layers": [
            [
                {"path": "etc", "type": "dir"},
                {"path": "etc/a", "data": "a"},
                {"path": "etc/b", "data": "b"},
                {"path": "bin", "type": "dir"},
                {"path": "bin/su", "data": "su", "mode": 0o4755},
                {"path": "lib", "type": "symlink", "link": "/usr/lib"},
            ],
            [{"path": "etc/.wh.a", "data": ""}, {"path": "etc/c", "data": "c"}],
        ]
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    out = tmp_path / "layout"
    subprocess.run(
        [sys.executable, LAB / "image.py", tmp_path / "spec.json", out, "--tag", "v1"],
        check=True,
    )
    return out


def test_an_image_is_applied_and_listed(tmp_path: Path) -> None:
    image = f"oci:{layout(tmp_path)}:v1"
    report = fastwrite.extract(image, tmp_path / "rootfs")
    root = tmp_path / "rootfs"
    assert sorted(p.name for p in (root / "etc").iterdir()) == ["b", "c"]
    assert (root / "bin/su").stat().st_mode & 0o7777 == 0o4755  # an image keeps setuid
    assert (root / "lib").readlink() == Path("/usr/lib")  # and its absolute symlinks
    assert report.files == 3 and report.failures == ()
    names = [entry.name for entry in fastwrite.list(image)]
    assert "etc/c" in names and "etc/a" not in names


def test_a_missing_tag_is_said(tmp_path: Path) -> None:
    image = f"oci:{layout(tmp_path)}:v2"
    with pytest.raises(OSError, match="no image tagged 'v2'"):
        fastwrite.extract(image, tmp_path / "rootfs")
    assert not (tmp_path / "rootfs").exists()
