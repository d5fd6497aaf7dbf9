"""extract and list: against zipfile and tarfile on archives made by the real tools, from paths
and from file objects; hostile and corrupt archives; what exists is kept."""

from __future__ import annotations

import errno
import gzip
import io
import os
import pickle
import tarfile
import tempfile
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
    # An entry extract would refuse fails the listing as it fails the extraction (the command
    # line's list exits 1 alike); every entry is listed all the same, on the group.
    with pytest.raises(fastwrite.ErrorGroup) as caught:
        fastwrite.list(archive)
    assert [(e.kind, e.path) for e in caught.value.errors] == [("refused", "../evil.txt")]
    entries = caught.value.entries
    assert entries is not None
    by_name = {e.name: e for e in entries}
    assert by_name["a/b.txt"].kind == "file" and by_name["a/b.txt"].size == 5
    assert by_name["a/b.txt"].path == "a/b.txt"
    assert by_name["../evil.txt"].path is None and by_name["../evil.txt"].problem
    with open(archive, "rb") as f, pytest.raises(fastwrite.ErrorGroup) as again:
        fastwrite.list(f)
    assert [e.name for e in again.value.entries or []] == [e.name for e in entries]
    good = tmp_path / "good.zip"
    with zipfile.ZipFile(good, "w") as z:
        z.writestr("a/b.txt", b"12345")
    assert [e.name for e in fastwrite.list(good)] == ["a/b.txt"]
    # The owner, as tarfile gives it (zipfile keeps none).
    assert fastwrite.list(good)[0].uid is None
    owned = tmp_path / "owned.tar"
    with tarfile.open(owned, "w") as t:
        info = tarfile.TarInfo("x.txt")
        info.uid, info.gid, info.uname, info.gname = 1234, 5678, "ann", "staff"
        t.addfile(info, io.BytesIO(b""))
    [entry] = fastwrite.list(owned)
    assert (entry.uid, entry.gid, entry.user, entry.group) == (1234, 5678, "ann", "staff")
    # What extract would warn of, issued as extract issues it.
    trailing = tmp_path / "trailing.tar.gz"
    trailing.write_bytes(gzip.compress(owned.read_bytes()) + b"junk after the gzip data")
    with pytest.warns(fastwrite.RunWarning, match="after the end of the gzip data"):
        assert [e.name for e in fastwrite.list(trailing)] == ["x.txt"]


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
    with pytest.raises(fastwrite.Error) as caught:
        fastwrite.extract(tmp_path / "missing.zip", tmp_path / "out")
    out = tmp_path / "out"
    out.mkdir()
    (out / "a").write_bytes(b"")
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("a", b"x")
        z.writestr("../b", b"x")
    with pytest.raises(fastwrite.ErrorGroup) as group:
        fastwrite.extract(archive, out)
    errors = [caught.value, *group.value.errors, fastwrite.Error(errno.ENOSPC, "full", "f")]
    assert [type(e).__bases__[-1] for e in errors] == [
        FileNotFoundError,
        FileExistsError,
        PermissionError,
        OSError,  # a plain Error: Python has no class for ENOSPC
    ]

    def fields(e: OSError) -> list[object]:
        return [getattr(e, f, None) for f in ("errno", "strerror", "filename", "kind", "path")]

    for error in errors:
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error)
        assert fields(again) == fields(error) and str(again) == str(error)
    assert "missing.zip" in str(caught.value)


def test_error_group_before_3_11_has_a_list(tmp_path: Path) -> None:
    group = fastwrite.ErrorGroup("m", [fastwrite.Error(5, "x", "f")])
    assert isinstance(group.errors, list) and len(group.exceptions) == 1


# -- Errors as Python's: the OSError subclass of each errno ----------------------------------


@pytest.mark.parametrize("number", sorted(errno.errorcode))
def test_an_error_is_the_oserror_subclass_python_gives_its_errno(number: int) -> None:
    error = fastwrite.Error(number, "message", "file")
    builtin = type(OSError(number, "message"))
    assert isinstance(error, builtin) and isinstance(error, fastwrite.Error)
    assert (error.errno, error.strerror, error.filename) == (number, "message", "file")
    if builtin is OSError:
        assert type(error) is fastwrite.Error
    assert type(fastwrite.Error(None, "no errno", None)) is fastwrite.Error


def test_a_missing_archive_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as caught:
        fastwrite.extract(tmp_path / "missing.zip", tmp_path / "out")
    assert isinstance(caught.value, fastwrite.Error) and caught.value.kind == "start"
    assert caught.value.filename == str(tmp_path / "missing.zip")
    with pytest.raises(FileNotFoundError):
        fastwrite.list(tmp_path / "missing.tar")
    with pytest.raises(IsADirectoryError):
        fastwrite.extract(tmp_path, tmp_path / "out")


def test_each_failure_is_caught_by_its_builtin(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "kept.txt").write_bytes(b"mine")
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("kept.txt", b"theirs")
        z.writestr("../evil.txt", b"x")
    with pytest.raises(fastwrite.ErrorGroup) as caught:
        fastwrite.extract(archive, out, patterns=["kept.txt", "*.txt", "nothing"])
    by_kind = {e.kind: e for e in caught.value.errors}
    assert isinstance(by_kind["already-exists"], FileExistsError)
    assert isinstance(by_kind["refused"], PermissionError)
    assert isinstance(by_kind["not-found"], FileNotFoundError)
    assert all(isinstance(e, fastwrite.Error) for e in caught.value.errors)


# -- filename: where the file was to be, never outside OUT -----------------------------------


def assert_inside(out: Path, errors: list[fastwrite.Error]) -> None:
    """Every error's filename is None or a path under out, with no `..` in it."""
    for error in errors:
        if error.filename is not None:
            name = os.fsdecode(error.filename)
            assert os.path.commonpath([out, name]) == str(out), error
            assert ".." not in Path(name).parts, error


@pytest.mark.parametrize("name", sorted(p.name for p in (DATA / "zip-slip").glob("*.[zt]*")))
def test_the_zip_slip_samples_name_nothing_outside_out(tmp_path: Path, name: str) -> None:
    out = tmp_path / "out"
    with pytest.raises(fastwrite.ErrorGroup) as caught:
        fastwrite.extract(DATA / "zip-slip" / name, out)
    [refused] = caught.value.errors
    assert refused.kind == "refused" and refused.filename is None
    assert refused.path.endswith("evil.txt") and ".." in refused.path  # the name as archived
    assert "evil.txt" in str(refused)
    assert (out / "good.txt").exists()


def hostile_tar(path: Path) -> Path:
    """A tar with every way out a name can take: `..`, a drive letter, a symlink out and a file
    through it, a hard link out; and absolute names, which lose their `/` and stay inside (as
    GNU tar and bsdtar write them)."""
    with tarfile.open(path, "w") as t:
        for name in ["/etc/x", "/abs/deep/y", "a/../../up.txt", "C:/win.txt", "//srv/share/z"]:
            info = tarfile.TarInfo(name)
            info.size = 1
            t.addfile(info, io.BytesIO(b"x"))
        for name, kind, target in [
            ("ln", tarfile.SYMTYPE, "/etc"),
            ("up", tarfile.SYMTYPE, "../../x"),
            ("hl", tarfile.LNKTYPE, "/etc/passwd"),
        ]:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, target
            t.addfile(info)
        info = tarfile.TarInfo("ln/passwd-x")
        info.size = 1
        t.addfile(info, io.BytesIO(b"x"))
    return path


def test_refused_names_have_no_filename(tmp_path: Path) -> None:
    archive = hostile_tar(tmp_path / "hostile.tar")
    out = tmp_path / "out"
    stripped = "removed the leading '/'"
    with pytest.raises(fastwrite.ErrorGroup) as caught:
        with pytest.warns(fastwrite.RunWarning, match=stripped):
            fastwrite.extract(archive, out)
    errors = caught.value.errors
    assert len(errors) == 6 and {e.kind for e in errors} == {"refused"}
    assert [e.filename for e in errors] == [None] * 6
    assert "C:/win.txt" in [e.path for e in errors] and "ln/passwd-x" in [e.path for e in errors]
    assert (out / "etc" / "x").exists() and (out / "srv" / "share" / "z").exists()
    # The same names in a zip.
    zipped = tmp_path / "hostile.zip"
    with zipfile.ZipFile(zipped, "w") as z:
        for name in ["/etc/x", "a/../../up.txt", "C:/win.txt", "C:\\w.txt", "\\\\srv\\x"]:
            z.writestr(name, b"x")
    with pytest.raises(fastwrite.ErrorGroup) as caught:
        with pytest.warns(fastwrite.RunWarning, match=stripped):
            fastwrite.extract(zipped, tmp_path / "out2")
    assert [e.filename for e in caught.value.errors] == [None] * 4
    assert (tmp_path / "out2" / "etc" / "x").exists()
    assert sorted(os.listdir(tmp_path)) == ["hostile.tar", "hostile.zip", "out", "out2"]


def test_filename_is_the_plain_path_under_out(tmp_path: Path) -> None:
    out = tmp_path / "out"
    names = ["./d.txt", "a//b.txt", "x/./y.txt"]
    for rel in ["d.txt", "a/b.txt", "x/y.txt"]:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(b"mine")
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for name in names:
            z.writestr(name, b"theirs")
    with pytest.raises(fastwrite.ErrorGroup) as caught:
        fastwrite.extract(archive, out)
    by_path = {e.path: e for e in caught.value.errors}
    assert by_path["./d.txt"].filename == str(out / "d.txt")
    assert by_path["a//b.txt"].filename == str(out / "a" / "b.txt")
    assert by_path["x/./y.txt"].filename == str(out / "x" / "y.txt")
    assert all(isinstance(by_path[n], FileExistsError) for n in names)
    assert all(os.path.exists(by_path[n].filename) for n in names)
    assert_inside(out, caught.value.errors)
    # A pattern is no file.
    with pytest.raises(fastwrite.ErrorGroup) as caught:
        fastwrite.extract(archive, tmp_path / "out2", patterns=["../nothing", "/etc/x"])
    assert [(e.kind, e.filename) for e in caught.value.errors] == [("not-found", None)] * 2


def test_stripped_names_have_no_filename(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    (out / "sub" / "s.txt").write_bytes(b"mine")
    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w") as t:
        info = tarfile.TarInfo("top/sub/s.txt")
        info.size = 1
        t.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(fastwrite.ErrorGroup) as caught:
        fastwrite.extract(archive, out, strip_components=1)
    [error] = caught.value.errors
    assert isinstance(error, FileExistsError) and error.path == "top/sub/s.txt"
    # Not out/top/sub/s.txt, where nothing was to go: the stripped name is not known here.
    assert error.filename is None


# -- file objects ----------------------------------------------------------------------------


def test_a_text_file_object_is_a_type_error_at_once(tmp_path: Path) -> None:
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("a.txt", b"\x83\xff not UTF-8")

    class TextReader:  # no io class: told by its read(0)
        def read(self, n: int = -1) -> str:
            return ""

    with open(archive, encoding="utf-8") as text:
        for source in [text, io.StringIO("PK"), TextReader()]:
            with pytest.raises(TypeError, match="binary file object") as caught:
                fastwrite.extract(source, tmp_path / "out")  # type: ignore[arg-type]
            assert caught.value.__cause__ is None  # said at once, not met in a read
            with pytest.raises(TypeError, match=r"fastwrite\.list\(\)"):
                fastwrite.list(source)  # type: ignore[arg-type]
        assert text.tell() == 0  # nothing was read
    assert not (tmp_path / "out").exists()


def test_a_file_object_is_named_by_its_name(tmp_path: Path) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not an archive" * 100)
    with open(junk, "rb") as f, pytest.raises(fastwrite.Error) as caught:
        fastwrite.extract(f, tmp_path / "out")
    assert caught.value.kind == "start" and caught.value.filename == str(junk)
    assert f"'{junk}'" in str(caught.value)
    # Not an io class (a wrapper that passes calls on): named all the same.
    with tempfile.NamedTemporaryFile(dir=tmp_path) as named:
        named.write(b"not an archive" * 100)
        named.seek(0)
        with pytest.raises(fastwrite.Error) as caught:
            fastwrite.list(named)  # type: ignore[arg-type]
        assert caught.value.filename == named.name
    # Without a name: shown as it is, no filename.
    with pytest.raises(fastwrite.Error) as caught:
        fastwrite.extract(io.BytesIO(b"not an archive" * 100), tmp_path / "out")
    assert caught.value.filename is None and "BytesIO" in str(caught.value)


def test_totals_not_known_are_none(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for i in range(20):
            info = tarfile.TarInfo(f"f{i}")
            info.size = 10
            t.addfile(info, io.BytesIO(b"x" * 10))
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(buf.getvalue())
    for i, source in enumerate([io.BytesIO(buf.getvalue()), archive]):
        seen: list[fastwrite.Progress] = []
        fastwrite.extract(source, tmp_path / f"out{i}", progress=seen.append)
        assert seen[-1].files == 20 and seen[-1].bytes == 200
        assert (seen[-1].total_files, seen[-1].total_bytes) == (None, None)
