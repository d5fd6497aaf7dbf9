"""Batch: a program's own files, from one thread or many, through write and open; every error
back when the batch ends."""

from __future__ import annotations

import array
import errno
import io
import json
import os
import sys
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import fastwrite


def test_write_from_one_thread(tmp_path: Path) -> None:
    root = tmp_path / "MyFont.ufo"
    with fastwrite.Batch(root) as batch:
        batch.write("metainfo.plist", b"<plist/>")
        for i in range(3366):
            batch.write(f"glyphs/g{i}.glif", f"<glyph name='g{i}'/>".encode())
    assert batch.report is not None and batch.report.files == 3367
    assert (root / "glyphs" / "g3365.glif").read_bytes() == b"<glyph name='g3365'/>"
    assert len(os.listdir(root / "glyphs")) == 3366


def test_bytes_like_data_and_metadata(tmp_path: Path) -> None:
    with fastwrite.Batch(tmp_path / "out") as batch:
        batch.write("a", bytearray(b"array"))
        batch.write("b", memoryview(b"xxview")[2:])
        batch.write("run.sh", b"#!/bin/sh\n", mode=0o755, mtime=1_500_000_000)
        batch.mkdir("empty/deep", mode=0o700)
        batch.symlink("link", "run.sh")
    out = tmp_path / "out"
    assert (out / "a").read_bytes() == b"array" and (out / "b").read_bytes() == b"view"
    assert (out / "run.sh").stat().st_mode & 0o777 == 0o755
    assert (out / "run.sh").stat().st_mtime == 1_500_000_000
    assert (out / "empty" / "deep").stat().st_mode & 0o777 == 0o700
    assert os.readlink(out / "link") == "run.sh"


def test_write_takes_str_as_utf8_and_any_buffer(tmp_path: Path) -> None:
    with fastwrite.Batch(tmp_path / "out") as batch:
        batch.write("text.txt", "café ✓\n")
        batch.write("empty.txt", "")
        batch.write("array.bin", array.array("H", [1, 2]))  # type: ignore[arg-type]
        for wrong in [5, None, ["a"], 1.5]:
            with pytest.raises(TypeError) as caught:
                batch.write("wrong", wrong)  # type: ignore[arg-type]
            message = str(caught.value)
            assert "Batch.write" in message and repr(type(wrong).__name__) in message
        with pytest.raises(UnicodeEncodeError):
            batch.write("lone-surrogate", "\udcff")
    out = tmp_path / "out"
    assert (out / "text.txt").read_bytes() == "café ✓\n".encode()
    assert (out / "empty.txt").read_bytes() == b""
    assert (out / "array.bin").read_bytes() == array.array("H", [1, 2]).tobytes()
    assert sorted(os.listdir(out)) == ["array.bin", "empty.txt", "text.txt"]


def test_open_for_serializers(tmp_path: Path) -> None:
    with fastwrite.Batch(tmp_path / "out") as batch:
        with batch.open("data.json") as f, io.TextIOWrapper(f, encoding="utf-8") as text:
            json.dump({"a": [1, 2, 3]}, text)
        root = ET.Element("glyph", name="a")
        with batch.open("glyphs/a.glif") as f:
            ET.ElementTree(root).write(f, encoding="utf-8", xml_declaration=True)
        f = batch.open("left-open.txt")
        f.write(b"written when the batch ends")
    out = tmp_path / "out"
    assert json.loads((out / "data.json").read_text()) == {"a": [1, 2, 3]}
    assert b'<glyph name="a" />' in (out / "glyphs" / "a.glif").read_bytes()
    assert (out / "left-open.txt").read_bytes() == b"written when the batch ends"


def test_a_serializer_that_fails_leaves_no_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="serializer broke"), fastwrite.Batch(out) as batch:
        batch.write("kept.txt", b"kept")
        with batch.open("half.json") as f:
            f.write(b'{"half": ')
            raise RuntimeError("serializer broke")
    assert (out / "kept.txt").read_bytes() == b"kept"
    assert not (out / "half.json").exists()


def test_a_refused_path_raises_at_once(tmp_path: Path) -> None:
    with fastwrite.Batch(tmp_path / "out") as batch:
        for bad in ["../escape.txt", "/etc/passwd-x", "a/../../b"]:
            with pytest.raises(PermissionError) as caught:
                batch.write(bad, b"x")
            assert isinstance(caught.value, fastwrite.Error)
            assert caught.value.kind == "refused" and caught.value.errno == errno.EPERM
            assert caught.value.path == bad and caught.value.filename is None
            with pytest.raises(PermissionError, match="refused"):
                batch.open(bad)
        with pytest.raises(PermissionError) as caught:
            batch.symlink("out-link", "../../etc")
        assert caught.value.path == "out-link" and caught.value.filename is None
        batch.write("fine.txt", b"ok")
    assert not (tmp_path / "escape.txt").exists()
    assert sorted(os.listdir(tmp_path / "out")) == ["fine.txt"]


def test_existing_files_fail_at_the_end_and_are_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_bytes(b"mine")
    with pytest.raises(fastwrite.ErrorGroup) as caught, fastwrite.Batch(out) as batch:
        batch.write("./mine.txt", b"theirs")
        batch.write("new.txt", b"new")
    [error] = caught.value.errors
    assert (error.kind, error.path, error.errno) == ("already-exists", "./mine.txt", errno.EEXIST)
    assert isinstance(error, FileExistsError) and error.filename == str(out / "mine.txt")
    assert caught.value.report is not None and caught.value.report.files == 1
    assert (out / "mine.txt").read_bytes() == b"mine"
    with fastwrite.Batch(out, overwrite="replace") as batch:
        batch.write("mine.txt", b"theirs")
    assert (out / "mine.txt").read_bytes() == b"theirs"


def test_the_body_error_and_the_batch_errors_both_come_back(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_bytes(b"mine")
    with pytest.raises(fastwrite.ErrorGroup) as caught, fastwrite.Batch(out) as batch:
        batch.write("mine.txt", b"theirs")
        raise KeyError("the program's own")
    assert isinstance(caught.value.__cause__, KeyError)
    assert [e.kind for e in caught.value.errors] == ["already-exists"]


def test_take_errors_still_fails_the_end(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "x").write_bytes(b"")
    batch = fastwrite.Batch(out)
    batch.write("x", b"1")
    taken: list[fastwrite.Error] = []
    for _ in range(200):
        taken += batch.take_errors()
        if taken:
            break
        threading.Event().wait(0.01)
    assert [e.kind for e in taken] == ["already-exists"]
    with pytest.raises(fastwrite.ErrorGroup) as caught:
        batch.close()
    assert [e.path for e in caught.value.errors] == ["x"]
    assert batch.closed
    assert batch.close() is caught.value.report  # ended once; its errors raised once
    with pytest.raises(ValueError):
        batch.write("y", b"")


def test_many_python_threads(tmp_path: Path) -> None:
    def work(batch: fastwrite.Batch, t: int) -> None:
        for i in range(300):
            batch.write(f"t{t}/f{i}", bytes([t]) * i)

    with fastwrite.Batch(tmp_path / "out") as batch:
        threads = [threading.Thread(target=work, args=(batch, t)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert batch.report is not None and batch.report.files == 2400
    assert (tmp_path / "out" / "t7" / "f299").read_bytes() == bytes([7]) * 299


def test_atomic_batch_all_or_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(ValueError), pytest.warns(fastwrite.RunWarning, match="atomic=True"):
        with fastwrite.Batch(out, atomic=True) as batch:
            batch.write("a", b"a")
            raise ValueError("stop")
    assert not out.exists()
    with fastwrite.Batch(out, atomic=True) as batch:
        batch.write("a", b"a")
    assert (out / "a").read_bytes() == b"a"


def test_close_and_fsync_settings(tmp_path: Path) -> None:
    for close in ("auto", "inline", "deferred", 3):
        with fastwrite.Batch(tmp_path / f"out-{close}", close=close, fsync=True) as batch:
            for i in range(20):
                batch.write(f"f{i}", b"x")
        assert len(os.listdir(tmp_path / f"out-{close}")) == 20
    with pytest.raises(ValueError):
        fastwrite.Batch(tmp_path / "bad", close="sometimes")  # type: ignore[arg-type]


def test_an_unclosed_batch_warns_and_still_writes(tmp_path: Path) -> None:
    batch = fastwrite.Batch(tmp_path / "out")
    batch.write("a", b"a")
    with pytest.warns(ResourceWarning):
        del batch
        import gc

        gc.collect()
    assert (tmp_path / "out" / "a").read_bytes() == b"a"


@pytest.mark.skipif(sys.platform == "win32", reason="a name Linux and macOS hold, Windows does not")
def test_non_utf8_names_round_trip(tmp_path: Path) -> None:
    name = os.fsdecode(b"caf\xe9.txt")  # Latin-1, not UTF-8
    with fastwrite.Batch(os.fsencode(tmp_path / "out")) as batch:
        batch.write(name, b"x")
    assert os.listdir(os.fsencode(tmp_path / "out")) == [b"caf\xe9.txt"]
