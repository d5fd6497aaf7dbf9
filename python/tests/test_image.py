"""Container images through the Python package: an OCI layout (built by lab/image.py, as the
Rust tests build theirs) applied and listed by its name, as the command line takes it."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import fastwrite

LAB = Path(__file__).resolve().parents[2] / "lab"


def layout(tmp_path: Path, architecture: str = "amd64") -> Path:
    spec = {
        "architecture": architecture,
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
        ],
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


def test_a_platform_is_asked_for_images_only(tmp_path: Path) -> None:
    image = f"oci:{layout(tmp_path, architecture='arm64')}:v1"
    # An image of one platform is taken as it is, or as the platform asked for...
    fastwrite.extract(image, tmp_path / "any")
    report = fastwrite.extract(image, tmp_path / "arm", platform="linux/arm64")
    assert report.files == 3
    # ...but not as another one.
    with pytest.raises(OSError, match="is for linux/arm64, not linux/amd64"):
        fastwrite.extract(image, tmp_path / "amd", platform="linux/amd64")
    assert not (tmp_path / "amd").exists()
    # And with an input that is not an image, the options that choose one are refused.
    with tarfile.open(tmp_path / "a.tar", "w") as tar:
        tar.add(tmp_path / "spec.json", arcname="spec.json")
    with pytest.raises(fastwrite.Error, match="choose an image"):
        fastwrite.extract(tmp_path / "a.tar", tmp_path / "tar", platform="linux/arm64")
    with pytest.raises(fastwrite.Error, match="choose an image"):
        fastwrite.extract(tmp_path / "a.tar", tmp_path / "tar", insecure_registry=True)
    with pytest.raises(fastwrite.Error, match="choose an image"):
        fastwrite.extract(tmp_path / "a.tar", tmp_path / "tar", layers_cache=tmp_path / "cache")
    assert not (tmp_path / "tar").exists()
    # Listing takes the platform as extracting does.
    assert len(fastwrite.list(image, platform="linux/arm64")) == len(fastwrite.list(image))
    with pytest.raises(OSError, match="is for linux/arm64, not linux/amd64"):
        fastwrite.list(image, platform="linux/amd64")
    with pytest.raises(fastwrite.Error, match="choose an image"):
        fastwrite.list(tmp_path / "a.tar", platform="linux/arm64")
    # A layers cache keeps what a registry serves: a layout's blobs are on disk already.
    report = fastwrite.extract(image, tmp_path / "cached", layers_cache=tmp_path / "cache")
    assert report.files == 3


def test_many_images_each_into_its_own_folder(tmp_path: Path) -> None:
    image = f"oci:{layout(tmp_path)}:v1"
    rows = fastwrite.extract_many(
        [image], tmp_path / "many", per_archive=True, layers_cache=tmp_path / "cache"
    )
    assert [row["status"] for row in rows] == ["done"], rows
    assert sorted(p.name for p in (tmp_path / "many/layout_v1/etc").iterdir()) == ["b", "c"]
    # A platform that is not the image's refuses it, as extract does.
    rows = fastwrite.extract_many(
        [image], tmp_path / "other", platform="linux/arm64", check_all=False
    )
    assert [row["status"] for row in rows] == ["failed"], rows
