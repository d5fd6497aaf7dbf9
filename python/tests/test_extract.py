"""extract and list: against zipfile and tarfile on archives made by the real tools, from paths
and from file objects; hostile and corrupt archives; what exists is kept."""

from __future__ import annotations

import errno
import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import DATA, require_tool, run, sample_tree, tree

import fastwrite


def zipfile_tree(archive: Path, out: Path) -> dict[str, object]:
    """What zipfile.extractall makes, with the modes zipfile drops put back (it writes every
    file 0644 and follows no symlink), so only content and names are compared for zips."""
    with zipfile.ZipFile(archive) as z:
        z.extractall(out)
    return {k: v[:2] for k, v in tree(out).items()}


def test_zip_by_info_zip_matches_zipfile(tmp_path: Path) -> None:
    require_tool("zip")
    src = sample_tree(tmp_path / "src")
    os.unlink(src / "link")  # zipfile.extractall writes a symlink as a file holding its target
    archive = tmp_path / "a.zip"
    run("zip", "-qr", archive, ".", cwd=src)
    report = fastwrite.extract(archive, tmp_path / "ours")
    ours = tree(tmp_path / "ours")
    assert {k: v[:2] for k, v in ours.items()} == zipfile_tree(archive, tmp_path / "theirs")
    assert ours["run.sh"][2] == 0o755  # Info-ZIP keeps the mode; fastwrite restores it
    assert report.files == 41 and report.failures == ()


def test_zip_by_zipfile(tmp_path: Path) -> None:
    archive = tmp_path / "py.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for i in range(300):
            z.writestr(f"pkg/mod{i % 7}/file{i}.py", f"x = {i}\n" * i)
        z.writestr("pkg/empty/", "")
    fastwrite.extract(archive, tmp_path / "ours")
    assert tree(tmp_path / "ours").keys() == zipfile_tree(archive, tmp_path / "theirs").keys()
    assert {k: v[:2] for k, v in tree(tmp_path / "ours").items()} == zipfile_tree(
        archive, tmp_path / "theirs2"
    )


@pytest.mark.parametrize(
    "tool,flags,suffix",
    [
        ("tar", "-czf", "tar.gz"),
        ("tar", "--zstd -cf", "tar.zst"),
        ("tar", "-cJf", "tar.xz"),
        ("tar", "-cjf", "tar.bz2"),
        ("bsdtar", "-cf", "tar"),
        ("bsdtar", "-czf", "tgz"),
    ],
)
def test_tar_by_tools_matches_tarfile(tmp_path: Path, tool: str, flags: str, suffix: str) -> None:
    require_tool(tool)
    if "zstd" in flags:
        require_tool("zstd")
    src = sample_tree(tmp_path / "src")
    archive = tmp_path / f"a.{suffix}"
    run(tool, *flags.split(), archive, "-C", src, ".")
    if suffix == "tar.zst":
        # tarfile reads no zstd before Python 3.14: compare with the decompressed tar.
        plain = tmp_path / "a.tar"
        run("zstd", "-qd", archive, "-o", plain)
        theirs_archive = plain
    else:
        theirs_archive = archive
    with tarfile.open(theirs_archive) as t:
        kwargs = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        t.extractall(tmp_path / "theirs", **kwargs)
    fastwrite.extract(archive, tmp_path / "ours")
    assert tree(tmp_path / "ours") == tree(tmp_path / "theirs")
    assert tree(tmp_path / "ours") == tree(src)


def test_tar_by_tarfile_from_a_file_object(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for i in range(50):
            data = f"line {i}\n".encode() * 10
            info = tarfile.TarInfo(f"a/b{i % 5}/c{i}.txt")
            info.size = len(data)
            info.mode = 0o640
            info.mtime = 1_600_000_000
            t.addfile(info, io.BytesIO(data))
    buf.seek(0)
    report = fastwrite.extract(buf, tmp_path / "out")
    assert report.files == 50
    f = tmp_path / "out" / "a" / "b3" / "c13.txt"
    assert f.read_bytes() == b"line 13\n" * 10
    assert f.stat().st_mtime == 1_600_000_000
    assert f.stat().st_mode & 0o777 == 0o640


def test_zip_from_a_file_object(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("x/y.txt", b"hello" * 100)
        z.writestr("z.bin", bytes(range(256)))
    buf.seek(0)
    fastwrite.extract(buf, tmp_path / "out")
    assert (tmp_path / "out" / "x" / "y.txt").read_bytes() == b"hello" * 100
    assert (tmp_path / "out" / "z.bin").read_bytes() == bytes(range(256))


def test_a_file_object_that_fails_to_read(tmp_path: Path) -> None:
    class Broken(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def read(self, n: int = -1) -> bytes:
            raise ValueError("the network went away")

    with pytest.raises(fastwrite.Error) as caught:
        fastwrite.extract(Broken(), tmp_path / "out")
    assert "the network went away" in str(caught.value)
    assert caught.value.kind == "start"


def test_selection_and_strip(tmp_path: Path) -> None:
    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w") as t:
        for name in ["proj/docs/a.md", "proj/docs/b.bak", "proj/src/x.rs"]:
            info = tarfile.TarInfo(name)
            info.size = 1
            t.addfile(info, io.BytesIO(b"x"))
    fastwrite.extract(
        archive, tmp_path / "out", patterns=["proj/docs/*"], exclude=["*.bak"], strip_components=1
    )
    assert sorted(tree(tmp_path / "out")) == ["docs", "docs/a.md"]
    with pytest.raises(fastwrite.ErrorGroup) as caught:
        fastwrite.extract(archive, tmp_path / "out2", patterns=["nothing/*"])
    assert [e.kind for e in caught.value.errors] == ["not-found"]


def test_list(tmp_path: Path) -> None:
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("a/b.txt", b"12345")
        z.writestr("../evil.txt", b"x")
    entries = fastwrite.list(archive)
    by_name = {e.name: e for e in entries}
    assert by_name["a/b.txt"].kind == "file" and by_name["a/b.txt"].size == 5
    assert by_name["a/b.txt"].path == "a/b.txt"
    assert by_name["../evil.txt"].path is None and by_name["../evil.txt"].problem
    with open(archive, "rb") as f:
        assert [e.name for e in fastwrite.list(f)] == [e.name for e in entries]


@pytest.mark.parametrize("name", ["zip-slip.zip", "zip-slip.tar"])
def test_escaping_paths_are_refused_and_nothing_leaves_out(tmp_path: Path, name: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    out = work / "out"
    with pytest.raises(fastwrite.ErrorGroup) as caught:
        fastwrite.extract(DATA / "zip-slip" / name, out)
    refused = [e for e in caught.value.errors if e.kind == "refused"]
    assert refused, caught.value.errors
    assert all(isinstance(e, OSError) and e.errno == errno.EPERM for e in refused)
    assert any(".." in e.path for e in refused)
    # Nothing outside OUT: the work folder holds OUT alone, and OUT only what the archive
    # names inside it.
    assert sorted(os.listdir(work)) == ["out"]
    assert caught.value.report is not None and caught.value.report.files >= 1


def test_a_corrupt_archive_names_the_entry(tmp_path: Path) -> None:
    good = io.BytesIO()
    with tarfile.open(fileobj=good, mode="w:gz") as t:
        for i in range(3):
            data = os.urandom(200_000)
            info = tarfile.TarInfo(f"f{i}.bin")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    damaged = bytearray(good.getvalue())
    damaged[len(damaged) // 2] ^= 0xFF
    archive = tmp_path / "bad.tar.gz"
    archive.write_bytes(bytes(damaged))
    with pytest.raises(fastwrite.ErrorGroup) as caught:
        fastwrite.extract(archive, tmp_path / "out")
    kinds = {e.kind for e in caught.value.errors}
    assert kinds & {"source", "unverified"}, caught.value.errors
    assert all(e.path for e in caught.value.errors)


def test_not_an_archive_and_a_missing_one(tmp_path: Path) -> None:
    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"this is not an archive at all" * 10)
    with pytest.raises(fastwrite.Error) as caught:
        fastwrite.extract(junk, tmp_path / "out")
    assert caught.value.kind == "start"
    with pytest.raises(OSError) as missing:
        fastwrite.extract(tmp_path / "missing.zip", tmp_path / "out")
    assert isinstance(missing.value, fastwrite.Error)
    assert missing.value.errno == errno.ENOENT
    assert missing.value.filename == str(tmp_path / "missing.zip")
    assert not (tmp_path / "out").exists()


def test_existing_files_are_kept_unless_asked(tmp_path: Path) -> None:
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("keep.txt", b"new")
        z.writestr("other.txt", b"other")
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_bytes(b"mine")
    with pytest.raises(fastwrite.ErrorGroup) as caught:
        fastwrite.extract(archive, out)
    [error] = caught.value.errors
    assert error.kind == "already-exists" and error.errno == errno.EEXIST
    assert error.path == "keep.txt" and error.filename == str(out / "keep.txt")
    assert (out / "keep.txt").read_bytes() == b"mine"
    assert (out / "other.txt").read_bytes() == b"other"
    fastwrite.extract(archive, out, overwrite="replace")
    assert (out / "keep.txt").read_bytes() == b"new"
    with pytest.raises(ValueError):
        fastwrite.extract(archive, out, overwrite="sometimes")  # type: ignore[arg-type]


def test_max_output_stops_a_bomb(tmp_path: Path) -> None:
    archive = tmp_path / "bomb.tar.gz"
    with tarfile.open(archive, "w:gz") as t:
        for i in range(4):
            info = tarfile.TarInfo(f"zeros{i}")
            info.size = 1 << 20
            t.addfile(info, io.BytesIO(bytes(info.size)))
    with pytest.raises(fastwrite.ErrorGroup) as caught:
        fastwrite.extract(archive, tmp_path / "out", max_output=1 << 21)
    assert "limit" in {e.kind for e in caught.value.errors}


def test_progress_is_called_and_its_exception_stops_the_run(tmp_path: Path) -> None:
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for i in range(200):
            z.writestr(f"f{i}", b"x" * 1000)
    seen: list[fastwrite.Progress] = []
    fastwrite.extract(archive, tmp_path / "out", progress=seen.append)
    assert seen and seen[-1].files == 200 and seen[-1].bytes == 200_000
    assert seen[-1].total_files == 200

    class Stop(Exception):
        pass

    def stop(progress: fastwrite.Progress) -> None:
        raise Stop()

    with pytest.raises(Stop):
        fastwrite.extract(archive, tmp_path / "out2", progress=stop)


def test_errors_pickle_and_print(tmp_path: Path) -> None:
    import pickle

    with pytest.raises(fastwrite.Error) as caught:
        fastwrite.extract(tmp_path / "missing.zip", tmp_path / "out")
    again = pickle.loads(pickle.dumps(caught.value))
    assert (again.kind, again.errno, str(again)) == ("start", errno.ENOENT, str(caught.value))
    assert "missing.zip" in str(caught.value)


def test_error_group_before_3_11_has_a_list(tmp_path: Path) -> None:
    group = fastwrite.ErrorGroup("m", [fastwrite.Error(5, "x", "f")])
    assert isinstance(group.errors, list) and len(group.exceptions) == 1
