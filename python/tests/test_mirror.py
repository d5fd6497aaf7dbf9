"""mirror: an exact copy, incremental, with delete, dry run and excludes."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import sample_tree, tree

import fastwrite


def test_mirror_copies_then_updates(tmp_path: Path) -> None:
    src = sample_tree(tmp_path / "src")
    dst = tmp_path / "dst"
    report = fastwrite.mirror(src, dst)
    assert tree(dst) == tree(src)
    assert report.files == 41
    again = fastwrite.mirror(src, dst)
    assert again.files == 0 and again.unchanged == 41
    (src / "d0" / "sub0" / "f0.txt").write_bytes(b"changed, and longer than before")
    (dst / "stray.txt").write_bytes(b"not in src")
    kept = fastwrite.mirror(src, dst)
    assert kept.files == 1 and (dst / "stray.txt").exists()
    plan = fastwrite.mirror(src, dst, delete=True, dry_run=True)
    assert any("stray.txt" in line for line in plan.actions)
    assert (dst / "stray.txt").exists()
    fastwrite.mirror(src, dst, delete=True)
    assert tree(dst) == tree(src)


def test_mirror_excludes(tmp_path: Path) -> None:
    src = sample_tree(tmp_path / "src")
    dst = tmp_path / "dst"
    fastwrite.mirror(src, dst, exclude=["d1/", "*.sh"])
    assert not (dst / "d1").exists() and not (dst / "run.sh").exists()
    assert (dst / "d0").is_dir()


def test_mirror_refuses_to_start(tmp_path: Path) -> None:
    with pytest.raises(fastwrite.Error) as caught:
        fastwrite.mirror(tmp_path / "missing", tmp_path / "dst")
    assert caught.value.kind == "start"
    src = sample_tree(tmp_path / "src")
    with pytest.raises(fastwrite.Error, match="inside"):
        fastwrite.mirror(src, src / "d0" / "copy")


def test_mirror_progress_totals_when_known(tmp_path: Path) -> None:
    src = sample_tree(tmp_path / "src")
    dst = tmp_path / "dst"
    seen: list[fastwrite.Progress] = []
    fastwrite.mirror(src, dst, progress=seen.append)  # into a new folder: copied as walked
    assert seen[-1].files == 41 and seen[-1].total_files is None
    (src / "d0" / "sub0" / "f0.txt").write_bytes(b"changed, and longer than before")
    seen.clear()
    fastwrite.mirror(src, dst, progress=seen.append)  # compared first: the total is known
    assert (seen[-1].files, seen[-1].total_files) == (1, 1)
    assert seen[-1].total_bytes == len(b"changed, and longer than before")
