"""extract_many: many archives, each exactly once across calls; rows; failures raised."""

from __future__ import annotations

import io
import json
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

import fastwrite


def make_archives(root: Path, count: int, files: int = 3) -> list[Path]:
    """``count`` archives under root, tars and zips in turn, each with ``files`` files whose
    content names the archive."""
    root.mkdir(parents=True, exist_ok=True)
    made = []
    for i in range(count):
        names = {f"dir/f{j}.txt": f"archive {i} file {j}\n".encode() for j in range(files)}
        if i % 2:
            path = root / f"a{i:03}.zip"
            with zipfile.ZipFile(path, "w") as z:
                for name, data in names.items():
                    z.writestr(name, data)
        else:
            path = root / f"a{i:03}.tar.gz"
            with tarfile.open(path, "w:gz") as t:
                for name, data in names.items():
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
        made.append(path)
    return made


def expected(count: int, files: int = 3) -> dict[str, bytes]:
    return {
        f"a{i:03}/dir/f{j}.txt": f"archive {i} file {j}\n".encode()
        for i in range(count)
        for j in range(files)
    }


def files_under(out: Path) -> dict[str, bytes]:
    """Every file under out but the records, by its path relative to out."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(out):
        dirnames[:] = [d for d in dirnames if d != ".fastwrite"]
        for name in filenames:
            path = Path(dirpath) / name
            found[path.relative_to(out).as_posix()] = path.read_bytes()
    return found


def test_a_glob_each_once_then_nothing_to_do(tmp_path: Path) -> None:
    make_archives(tmp_path / "in", 6)
    out = tmp_path / "out"
    report = tmp_path / "report.jsonl"
    rows = fastwrite.extract_many(
        [str(tmp_path / "in" / "*")], out, per_archive=True, report=report
    )
    assert sorted(r["status"] for r in rows) == ["done"] * 6
    assert files_under(out) == expected(6)
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    assert lines == rows
    assert {r["files"] for r in rows} == {3}
    assert len(os.listdir(out / ".fastwrite" / "done")) == 6
    again = fastwrite.extract_many([str(tmp_path / "in" / "*")], out, per_archive=True)
    assert [r["status"] for r in again] == ["skipped-done"] * 6


def test_sources_expand_with_identity_and_shards_split(tmp_path: Path) -> None:
    made = make_archives(tmp_path / "in", 8)
    sources = fastwrite.expand([str(tmp_path / "in" / "*.zip"), made[0]])
    assert [Path(s.name).name for s in sources] == [
        "a001.zip",
        "a003.zip",
        "a005.zip",
        "a007.zip",
        "a000.tar.gz",
    ]
    assert all(s.identity.startswith("size ") for s in sources)
    out = tmp_path / "out"
    taken = []
    for index in range(3):
        rows = fastwrite.extract_many(made, out, per_archive=True, shard=(index, 3))
        taken += [r["source"] for r in rows]
    assert sorted(taken) == sorted(str(p) for p in made)
    assert files_under(out) == expected(8)


def test_a_failed_archive_raises_with_every_row(tmp_path: Path) -> None:
    made = make_archives(tmp_path / "in", 3)
    made[1].write_bytes(b"PK\x03\x04 not a zip at all")
    out = tmp_path / "out"
    with pytest.raises(fastwrite.ErrorGroup) as caught:
        fastwrite.extract_many(made, out, per_archive=True)
    group = caught.value
    assert [e.path for e in group.errors] == [str(made[1])]
    assert group.errors[0].kind == "failed"
    assert isinstance(group.errors[0], OSError)
    assert group.rows is not None and len(group.rows) == 3
    # Unchecked, the rows come back; the failed archive has no record, so it is tried again.
    rows = fastwrite.extract_many(made, out, per_archive=True, check_all=False)
    by_status = {Path(r["source"]).name: r["status"] for r in rows}
    assert by_status == {
        "a000.tar.gz": "skipped-done",
        "a001.zip": "failed",
        "a002.tar.gz": "skipped-done",
    }


def test_a_changed_archive_is_said_and_redone_only_when_asked(tmp_path: Path) -> None:
    made = make_archives(tmp_path / "in", 2)
    out = tmp_path / "out"
    fastwrite.extract_many(made, out, per_archive=True)
    os.utime(made[0], (1_000_000_000, 1_000_000_000))
    with pytest.raises(fastwrite.ErrorGroup) as caught:
        fastwrite.extract_many(made, out, per_archive=True)
    assert [e.kind for e in caught.value.errors] == ["changed"]
    assert "overwrite='replace'" in str(caught.value.errors[0])
    rows = fastwrite.extract_many(made, out, per_archive=True, overwrite="replace")
    assert sorted(r["status"] for r in rows) == ["done", "skipped-done"]


def test_two_archives_for_one_folder_refused_before_writing(tmp_path: Path) -> None:
    make_archives(tmp_path / "x", 1)
    make_archives(tmp_path / "y", 1)
    sources = [tmp_path / "x" / "a000.tar.gz", tmp_path / "y" / "a000.tar.gz"]
    out = tmp_path / "out"
    with pytest.raises(fastwrite.Error) as caught:
        fastwrite.extract_many(sources, out, per_archive=True)
    assert caught.value.kind == "start"
    assert "per_archive=True" in str(caught.value)
    assert not (out / "a000").exists()


def test_a_glob_matching_nothing_cannot_start(tmp_path: Path) -> None:
    with pytest.raises(fastwrite.Error) as caught:
        fastwrite.expand([str(tmp_path / "*.zip")])
    assert caught.value.kind == "start"


def test_the_request_cap_is_set_and_cleared() -> None:
    with pytest.raises(ValueError):
        fastwrite.set_max_requests_per_second(0)
    fastwrite.set_max_requests_per_second(1000)
    fastwrite.set_max_requests_per_second(None)
