"""ErrorGroup as an ExceptionGroup: `except*` (Python 3.11 syntax; conftest leaves this file
out before 3.11)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import fastwrite


def test_error_group_is_an_exception_group(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "a").write_bytes(b"")
    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w") as t:
        t.addfile(tarfile.TarInfo("a"), io.BytesIO())
    caught = []
    try:
        fastwrite.extract(archive, out)
    except* fastwrite.Error as group:
        caught = list(group.exceptions)
    assert [e.kind for e in caught] == ["already-exists"]


def test_except_star_by_builtin(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "a").write_bytes(b"")
    archive = tmp_path / "a.tar"
    with tarfile.open(archive, "w") as t:
        t.addfile(tarfile.TarInfo("a"), io.BytesIO())
        t.addfile(tarfile.TarInfo("../b"), io.BytesIO())
    existing, refused = [], []
    try:
        fastwrite.extract(archive, out)
    except* FileExistsError as group:
        existing = list(group.exceptions)
    except* PermissionError as group:
        refused = list(group.exceptions)
    assert [e.path for e in existing] == ["a"] and [e.path for e in refused] == ["../b"]
    assert all(isinstance(e, fastwrite.Error) for e in existing + refused)
