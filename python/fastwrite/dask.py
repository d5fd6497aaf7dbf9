"""Many archives over a Dask cluster, each exactly once (``pip install 'fastwrite[dask]'``).

`extract_all` lists the sources once on the client (a bucket glob is one listing), groups small
archives into tasks worth their overhead, and maps the tasks over the cluster's workers. Each
task is the same idempotent step as ``fastwrite extract --per-archive`` (`fastwrite.extract_many`
on its group): a completion record under the destination marks each archive done, so a task
retried after its worker died skips what that worker finished and takes what it left
half-written as its own. Nothing is shared between workers but the destination::

    from dask.distributed import Client
    import fastwrite.dask

    client = Client("scheduler:8786")
    rows = fastwrite.dask.extract_all(
        client, ["s3://raw/shards/*.tar.gz"], "s3://clean/shards/", report="report.jsonl"
    )
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterable
from typing import Any

from . import _native
from ._many import (
    Row,
    Source,
    check,
    expand,
    extract_many,
    set_max_requests_per_second,
    write_rows,
)

__all__ = ["extract_all", "group"]

_SIZE = re.compile(r"\bsize (\d+)")


def group(
    sources: Iterable[Source],
    task_bytes: int = 256 << 20,
    task_archives: int = 64,
) -> builtins.list[builtins.list[Source]]:
    """The sources in tasks, in order: consecutive archives grouped until the next would take a
    task past ``task_bytes`` (by the size in its identity) or ``task_archives`` archives. An
    archive as large as ``task_bytes`` or larger is a task of its own (archives are never
    split); one whose size is not known (an ``https://`` URL) counts as ``task_bytes / 8``."""
    tasks: builtins.list[builtins.list[Source]] = []
    current: builtins.list[Source] = []
    total = 0
    for source in sources:
        found = _SIZE.search(source.identity)
        size = int(found.group(1)) if found else task_bytes // 8
        if current and (total + size > task_bytes or len(current) >= task_archives):
            tasks.append(current)
            current, total = [], 0
        current.append(source)
        total += size
    if current:
        tasks.append(current)
    return tasks


def _task(
    sources: builtins.list[Source],
    dest: str,
    options: dict[str, Any],
    max_requests_per_second: int | None,
) -> builtins.list[Row]:
    """One task on a worker: its archives through the one-archive step (never raising for an
    archive that failed: its row says so, and the client checks every row)."""
    set_max_requests_per_second(max_requests_per_second)
    return extract_many(sources, dest, check_all=False, **options)


def _failed(source: Source, destination: str, error: BaseException) -> Row:
    """The row of an archive whose task raised (after its retries), as a failure."""
    return {
        "source": source.name,
        "identity": source.identity,
        "destination": destination,
        "status": "failed",
        "files": 0,
        "bytes": 0,
        "seconds": 0.0,
        "reason": f"its task failed: {type(error).__name__}: {error}",
        "failures": [],
        "warnings": [],
    }


def extract_all(
    client: Any,
    sources: Iterable[str | Source],
    dest: str,
    *,
    per_archive: bool = True,
    report: str | None = None,
    task_bytes: int = 256 << 20,
    task_archives: int = 64,
    retries: int = 3,
    max_requests_per_second: int | None = None,
    check_all: bool = True,
    **extract_options: Any,
) -> builtins.list[Row]:
    """Extracts every archive of ``sources`` (paths, URLs, globs such as
    ``'s3://raw/shards/*.tar.gz'``: see `fastwrite.expand`) into ``dest`` on the workers of the
    `distributed.Client` ``client``, each exactly once across runs and retries.

    - ``per_archive``: each archive into its own folder or prefix under ``dest`` (default
      here, as a cluster's archives rarely belong in one tree).
    - ``report``: a file (on the client) written with every archive's row as JSON Lines, the
      rows of each task as it ends, so a run stopped part-way leaves a valid report.
    - ``task_bytes``, ``task_archives``: how small archives are grouped into tasks (`group`).
    - ``retries``: how often a task that raised is run again (a task whose worker died is
      rescheduled by Dask itself, up to its ``distributed.scheduler.allowed-failures``).
    - ``max_requests_per_second``: each worker process's cap on its requests to the store
      (`fastwrite.set_max_requests_per_second`): with W worker processes the cluster sends at
      most W times this.
    - ``extract_options``: as for `fastwrite.extract_many` (``overwrite``, ``patterns``,
      ``threads``, ``at_once``...), the same on every worker.

    The workers must reach ``dest`` and the sources by the same names: a bucket, or a shared
    filesystem mounted alike. Returns one row per archive (see `fastwrite.extract_many`): an
    archive a dead worker had finished before its task was retried is ``skipped-done``, not
    ``done``. With ``check_all`` (the default) raises `fastwrite.ErrorGroup`, with every row as
    its ``rows``, if any archive failed or changed.
    """
    from distributed import as_completed

    listed = expand(sources)
    # Two archives that would share a folder are refused here, before any task runs (each
    # task sees only its own).
    destinations = _native.destinations([tuple(s) for s in listed], dest, per_archive)
    tasks = group(listed, task_bytes, task_archives)
    options = dict(extract_options, per_archive=per_archive)
    futures = {
        client.submit(
            _task, task, dest, options, max_requests_per_second, retries=retries, pure=False
        ): task
        for task in tasks
    }
    where = {s.name: d for s, d in zip(listed, destinations)}
    if report is not None:
        write_rows(report, [])
    rows: builtins.list[Row] = []
    for future in as_completed(futures):  # type: ignore[no-untyped-call]
        try:
            task_rows: builtins.list[Row] = future.result()
        except Exception as error:  # noqa: BLE001 (every archive of the task is reported)
            task_rows = [_failed(s, where[s.name], error) for s in futures[future]]
        rows.extend(task_rows)
        if report is not None:
            write_rows(report, task_rows, append=True)
    return check(rows) if check_all else rows
