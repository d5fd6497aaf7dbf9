"""fastwrite.dask: many archives over a LocalCluster of two worker processes, one of them killed
mid-run; the final state exact, every archive recorded once. Skipped where distributed is not
installed (python/test installs it for the first Python only)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from test_many import expected, files_under, make_archives

distributed = pytest.importorskip("distributed")

import fastwrite  # noqa: E402
import fastwrite.dask  # noqa: E402

ARCHIVES = 40
FILES = 400


@pytest.fixture
def client() -> object:
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=50,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def test_a_killed_worker_leaves_the_exact_tree(tmp_path: Path, client: object) -> None:
    make_archives(tmp_path / "in", ARCHIVES, FILES)
    out = tmp_path / "out"
    done = out / ".fastwrite" / "done"
    pids = list(client.run(os.getpid).values())  # type: ignore[attr-defined]
    killed_at: list[int] = []

    def kill_one_worker() -> None:
        # Once a few archives are done, the first worker process dies at once (SIGKILL): its
        # task is rescheduled on the other, whose run takes the half-written archive as its own.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = len(os.listdir(done)) if done.is_dir() else 0
            if found >= 3:
                os.kill(pids[0], signal.SIGKILL)
                killed_at.append(found)
                return
            time.sleep(0.005)

    killer = threading.Thread(target=kill_one_worker)
    killer.start()
    report = tmp_path / "report.jsonl"
    rows = fastwrite.dask.extract_all(
        client,
        [str(tmp_path / "in" / "*")],
        str(out),
        report=str(report),
        task_archives=1,
    )
    killer.join()
    assert killed_at and killed_at[0] < ARCHIVES, "the worker was killed before the end"
    assert files_under(out) == expected(ARCHIVES, FILES)
    assert len(os.listdir(done)) == ARCHIVES
    assert sorted(Path(r["source"]).name for r in rows) == sorted(
        p.name for p in (tmp_path / "in").iterdir()
    )
    assert {r["status"] for r in rows} <= {"done", "skipped-done"}
    assert [json.loads(line) for line in report.read_text().splitlines()] == rows
    # No temporary file left behind by the killed attempt.
    leftovers = [n for _, _, names in os.walk(out) for n in names if ".fastwrite-" in n]
    assert leftovers == []
    again = fastwrite.dask.extract_all(client, [str(tmp_path / "in" / "*")], str(out))
    assert {r["status"] for r in again} == {"skipped-done"}


def test_groups_small_archives_and_reports_a_failed_task(tmp_path: Path, client: object) -> None:
    made = make_archives(tmp_path / "in", 6, 2)
    tasks = fastwrite.dask.group(fastwrite.expand(made), task_bytes=1 << 30, task_archives=4)
    assert [len(t) for t in tasks] == [4, 2]
    big = fastwrite.Source("big.tar", "size 999")
    assert [len(t) for t in fastwrite.dask.group([big, big], task_bytes=1000)] == [1, 1]
    made[2].write_bytes(b"\x1f\x8b not gzip")
    out = tmp_path / "out"
    with pytest.raises(fastwrite.ErrorGroup) as caught:
        fastwrite.dask.extract_all(client, made, str(out), task_archives=2)
    assert [e.path for e in caught.value.errors] == [str(made[2])]
    assert caught.value.rows is not None and len(caught.value.rows) == 6
