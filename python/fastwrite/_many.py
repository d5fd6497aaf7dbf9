"""Runs of many archives, each exactly once: `expand`, `extract_many` (and, over a Dask
cluster, `fastwrite.dask.extract_all`). docs/many-archives.md has the guarantees."""

from __future__ import annotations

import builtins
import errno
import json
import os
import sys
from collections.abc import Iterable
from typing import Any, NamedTuple

from . import _native, _types
from ._errors import Error, ErrorGroup
from ._types import ClosePolicy, OverwritePolicy, StrPath

#: One source's report: the fields of a line of ``fastwrite extract --report``: ``source``,
#: ``identity``, ``destination``, ``status`` (``done``, ``skipped-done``, ``failed``,
#: ``changed``), ``files``, ``bytes``, ``seconds``, ``reason`` (why it failed or was left
#: alone, else ``None``), ``failures`` (a dict each: ``path``, ``kind``, ``reason``, and ``key``
#: into a bucket), ``warnings`` and ``pulled_from`` (an image from a registry: where it came from,
#: else ``None``).
Row = dict[str, Any]


class Source(NamedTuple):
    """One archive of a run of many: its path or URL, and what identifies its content (a local
    file's size and mtime, an object's ETag and size; empty for an ``https://`` URL). A
    completion record names both: a source whose identity changed since is ``changed``."""

    name: str
    identity: str


def expand(sources: Iterable[StrPath | Source]) -> builtins.list[Source]:
    """The sources named, in order: a path or URL as it is; a glob the shell did not expand
    (``'dir/**/*.zip'``, ``'s3://raw/shards/*.tar.gz'``: one listing of the bucket) expanded
    here, ``*`` within a name and ``**`` across ``/``; a `Source` as it is.

    Raises `Error` (kind ``start``) for a glob that matches nothing or a listing that fails.
    """
    found: builtins.list[Source] = []
    pending: builtins.list[str] = []

    def flush() -> None:
        if pending:
            found.extend(Source(n, i) for n, i in _native.expand(pending))
            pending.clear()

    for source in sources:
        if isinstance(source, Source):
            flush()
            found.append(source)
        else:
            pending.append(os.fsdecode(source))
    flush()
    return found


def failures_of(rows: Iterable[Row]) -> builtins.list[Error]:
    """One `Error` for each source of ``rows`` that did not end done (or done before): its
    ``path`` the source, its ``kind`` its status (``failed`` or ``changed``), its message the
    reason and the first of its entries' failures."""
    errors = []
    for row in rows:
        if row["status"] in ("done", "skipped-done"):
            continue
        why = row["reason"] or row["status"]
        if row["failures"]:
            first = row["failures"][0]
            why = f"{why}; the first: '{first['path']}': {first['reason']}"
        error = Error(errno.EIO, why, row["source"])
        error.kind = row["status"]
        error.path = row["source"]
        errors.append(error)
    return errors


def check(rows: builtins.list[Row]) -> builtins.list[Row]:
    """``rows`` if every source ended done (or done before); else raises `ErrorGroup` with
    one `Error` for each that did not (`failures_of`), and every row as its ``rows``."""
    errors = failures_of(rows)
    if not errors:
        return rows
    message = f"{len(errors)} of {len(rows)} archives not extracted, the first: {errors[0]}"
    raise ErrorGroup(message, errors, None, None, rows)


def set_max_requests_per_second(per_second: int | None) -> None:
    """Caps the requests this process sends to object stores at ``per_second``, every run's
    together, retries included (``None``: no cap, the default), as the command line's
    ``--max-requests-per-second``: how a fleet of processes is held under a store's per-prefix
    limit (S3's about 3,500 PUT/s; docs/many-archives.md says what to set). Raises
    `ValueError` for 0."""
    _native.set_max_requests_per_second(per_second)


def write_rows(report: StrPath, rows: Iterable[Row], append: bool = False) -> None:
    """Writes ``rows`` to the file ``report`` as JSON Lines, one source a line, as
    ``--report`` writes them."""
    with open(report, "a" if append else "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def extract_many(
    sources: Iterable[StrPath | Source],
    out: StrPath,
    *,
    per_archive: bool = False,
    shard: tuple[int, int] | None = None,
    at_once: int | None = None,
    report: StrPath | None = None,
    check_all: bool = True,
    patterns: Iterable[str] | None = None,
    exclude: Iterable[str] = (),
    strip_components: int = 0,
    overwrite: OverwritePolicy = "refuse",
    password: str | bytes | None = None,
    max_output: int | None = None,
    threads: int | None = None,
    close: ClosePolicy = "auto",
    fsync: bool = False,
    space_check: bool = True,
    devices: bool = False,
    retries: int | None = None,
    retry_timeout: int | None = None,
    platform: str | None = None,
    insecure_registry: bool = False,
    layers_cache: StrPath | None = None,
) -> builtins.list[Row]:
    """Extracts each of ``sources`` (paths, URLs, globs, `Source`: see `expand`) into ``out``
    (a folder, or ``s3://BUCKET/PREFIX``), each exactly once across calls, as
    ``fastwrite extract 'GLOB' -o OUT`` does: a completion record under
    ``out/.fastwrite/done/`` marks each archive done, so the same call again skips what is
    done, finishes what a killed call left half-done, and says which archives changed since
    (``changed``; extracted again only with ``overwrite="replace"`` or ``"update"``).

    - ``per_archive``: each archive into a folder (or prefix) of its own under ``out``, named
      after it without its suffixes (``shard-7.tar.gz`` into ``out/shard-7/``; an image by its
      name and tag, ``docker://ghcr.io/team/app:1.4`` into ``out/app_1.4/``).
    - ``platform``, ``insecure_registry``, ``layers_cache``: for sources that are container
      images, as for `extract` (with ``layers_cache``, images that share a base fetch it once).
    - ``shard``: ``(I, N)``, only the sources whose name hashes to ``I`` of ``N`` (the same
      split on every machine). ``at_once``: archives extracted at once (default: two per core
      into a folder, eight per core into or from a bucket).
    - ``report``: a file to write every source's row to, as JSON Lines.
    - The rest as for `extract`.

    Returns one row (a dict: `Row`) per source taken, in the order they ended. Raises `Error`
    (kind ``start``) if the run cannot start (a glob matching nothing, two sources that would
    share a folder); with ``check_all`` (the default), `ErrorGroup` if any source failed or
    changed, its ``rows`` every row; `KeyboardInterrupt` on Ctrl-C, once the archives under way
    are closed and checked, carrying the rows so far as ``fastwrite_rows``.
    """
    pairs = [tuple(s) for s in expand(sources)]
    rows, stopped = _native.extract_many(
        pairs,
        os.fsdecode(out),
        per_archive=per_archive,
        shard=shard,
        at_once=at_once,
        **_types.options(locals(), "extract_many"),
    )
    if report is not None:
        write_rows(report, rows)
    if stopped is not None:
        stopped.fastwrite_rows = rows  # type: ignore[attr-defined]
        if sys.version_info >= (3, 11):
            stopped.add_note(f"fastwrite: {len(rows)} archives ended before the stop")
        raise stopped
    return check(rows) if check_all else rows
