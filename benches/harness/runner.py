"""The one runner: every timed run of every bench goes through `Bench.batch`, so every bench
measures the same way.

- Round-robin: each round runs every tool once, each round starting one tool further on (A B,
  B A, ...), so no tool has its runs in a row and each gets each place in the order.
- A fresh folder (or bucket prefix) for every run, never deleted during the bench: on these
  machines' journal-less ext4 a delete makes creating files 4-14x slower for up to 6 minutes
  (FIELD-NOTES, "Benchmark trap"); so before each batch the creation probe must be fast again.
- Every exit status checked, and every output (its files and sizes, or a prefix's keys) against
  what it must be; a failed check fails the bench at its end, loudly, its outputs kept.
- Timed here, in Python, rather than by hyperfine: hyperfine runs one command's runs back to
  back (no round-robin), and cannot read what a bench counts around each run (a proxy's
  requests, a server's CPU); os.wait4 gives the client's CPU, its children's included (a
  pipeline's, a shell's), and GNU time its peak RSS, the same fork and exec for every tool.
"""

import argparse
import contextlib
import json
import os
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import fixtures
from .fixtures import CACHE, SETTLE_MARKER, say

SETTLE = int(os.environ.get("BENCH_SETTLE", "370"))  # ext4's RECENTCY_MIN 60 + RECENTCY_DIRTY 300
PROBE_MS = int(os.environ.get("BENCH_PROBE_MS", "120"))  # ~40 when healthy
SETTLE_MAX = int(os.environ.get("BENCH_SETTLE_MAX", "400"))


def q(word):
    return shlex.quote(str(word))


def shell(command):
    """A pipeline as one timed command; pipefail, so a failing first stage fails the run."""
    return ["bash", "-c", f"set -o pipefail; {command}"]


@dataclass
class Slot:
    """One run: its tool, its round, its fresh output folder, an id to name a prefix by, and
    what a check or BEFORE_RUN finds worth keeping with the run (EXTRA)."""

    tool: str
    round: int
    out: Path
    id: str
    extra: dict = field(default_factory=dict)


def timed(argv, log, timeout, env=None, cwd=None):
    """Runs ARGV (its output to LOG), killed with its whole group after TIMEOUT seconds. Under
    GNU time for the peak RSS: a child of this process would report this process's own (the
    pages it had when it forked count until it execs); GNU time is small, and the same for all."""
    rss = Path(f"{log}.rss")
    with open(log, "wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            ["/usr/bin/time", "-q", "-f", "%M", "-o", rss] + [str(a) for a in argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        late = []

        def kill():
            late.append(True)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        killer = threading.Timer(timeout, kill)
        killer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        killer.cancel()
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    return {
        "wall": wall,
        "user": usage.ru_utime,
        "sys": usage.ru_stime,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss_kib": int((rss.read_text().split() or [0])[-1]) if rss.exists() else 0,
        "exit": code,
        "timed_out": bool(late),
    }


def probe_ms(root):
    """Milliseconds to create 2,000 empty files in 100 new folders under ROOT (like an
    extraction: as many block groups touched). Left in place: deleting them would re-arm the
    very delay a bench waits out."""
    root.mkdir(parents=True)
    t = time.perf_counter()
    for d in range(100):
        os.mkdir(root / str(d))
        for f in range(20):
            os.close(os.open(root / str(d) / str(f), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644))
    return round((time.perf_counter() - t) * 1000)


def wait_for_fast_creates(work, smoke=False):
    """Waits out our own last delete (its inodes' blocks must get dirty again before the probe
    tells), then until the probe is fast (anybody's deletes), re-probing every 15 s."""
    age = time.time() - SETTLE_MARKER.stat().st_mtime if SETTLE_MARKER.exists() else SETTLE
    if age < SETTLE and not smoke:
        say(f"a bench deleted its outputs {age:.0f} s ago; waiting {SETTLE - age:.0f} s")
        time.sleep(SETTLE - age)
    start, n = time.monotonic(), 0
    while True:
        while (work / ".probe" / str(n)).exists():
            n += 1
        ms = probe_ms(work / ".probe" / str(n))
        if ms <= PROBE_MS:
            return say(f"file-creation probe: {ms} ms for 2,000 files (ok, <= {PROBE_MS})")
        if smoke or time.monotonic() - start >= SETTLE_MAX:
            return say(f"WARNING: file creation is slow ({ms} ms for 2,000 files): timings skewed")
        say(f"file-creation probe: {ms} ms for 2,000 files (> {PROBE_MS}); re-probing in 15 s")
        time.sleep(15)


def free_mib():
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemFree:"):
            return int(line.split()[1]) // 1024
    return 0


def free_memory(hot):
    """With less than 4 GiB free, drops clean page cache (every run's pages would otherwise come
    from reclaim, whose cost depends on the machine's history) and reads HOT back in."""
    if free_mib() >= 4096 or not os.access("/proc/sys/vm/drop_caches", os.W_OK):
        return
    say(f"only {free_mib()} MiB free: dropping clean page cache, then reading the inputs again")
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("1")
    for path in hot:
        subprocess.run(["bash", "-c", f"find {q(path)} -type f -exec cat -- {{}} + >/dev/null"])


def fill_free_memory(work, keep_mib=1024):
    """Reads a sparse file the size of all free memory but KEEP_MIB into the page cache: every
    run then gets its pages by reclaiming clean pages, the same way for every tool. On these VMs
    memory that sat free is slow to touch again (the host took it back), and which runs get it
    decides their times (seen: the same copy 0.17 s, then 1.4 s)."""
    fill = free_mib() - keep_mib
    if fill < 256:
        return
    n = len(list(work.glob(".fill-*")))
    path = work / f".fill-{n}"
    with open(path, "wb") as f:
        f.truncate(fill << 20)
    subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=1M", "status=none"], check=True)
    say(f"read {fill} MiB of zeros into the page cache: every run's pages come from reclaim")


def warn_if_busy():
    load = float(Path("/proc/loadavg").read_text().split()[0])
    if load > 0.5:
        say(f"WARNING: load average {load}: other work on this machine will skew the timings")


def common_arguments(parser, rounds):
    parser.add_argument("-n", "--rounds", type=int, default=rounds, help=f"default {rounds}")
    parser.add_argument("--warmup", type=int, default=0, help="untimed rounds first (checked)")
    parser.add_argument("--smoke", action="store_true", help="one round of the smallest input")
    parser.add_argument("--tools", help="only these tools (comma-separated names)")
    parser.add_argument("--fastwrite", help="the binary (default: target/release/fastwrite)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds a run may take")
    parser.add_argument("--keep", action="store_true", help="keep the outputs")


class Bench:
    """One bench's run: its work folder, its batches' rows, its failures, its results."""

    def __init__(self, name, args):
        self.name, self.args, self.smoke = name, args, args.smoke
        self.rounds = 1 if args.smoke else args.rounds
        self.stamp = time.strftime("%Y%m%d-%H%M%S")
        self.work = CACHE / "work" / f"{name}-{self.stamp}"
        self.results = CACHE / "results"
        if not os.path.exists("/usr/bin/time"):
            raise SystemExit("bench: GNU time is required (apt-get install -y time)")
        self.work.mkdir(parents=True)
        self.results.mkdir(parents=True, exist_ok=True)
        self.rows, self.failures, self._fastwrite = [], [], None

    def fastwrite(self):
        if self._fastwrite is None:
            self._fastwrite = fixtures.fastwrite(self.args.fastwrite)
        return self._fastwrite

    def wanted(self, tools, default=None):
        """TOOLS ({name: ...}) that --tools names (else those in DEFAULT, else all)."""
        names = self.args.tools.split(",") if self.args.tools else default or list(tools)
        unknown = [n for n in names if n not in tools and n not in fixtures.MISSING]
        if unknown:
            raise SystemExit(f"bench: unknown tools {unknown} (these are: {', '.join(tools)})")
        return {n: tools[n] for n in tools if n in names}

    def batch(self, tag, tools, check=None, *, env=None, out_root=None, meters=None,
              before_run=None, reference=None, allowed_exits=None, fill_memory=False, hot=(),
              rounds=None, settle=True, make_out=True, sync=True):  # fmt: skip
        """Runs each of TOOLS ({name: slot -> argv or a command line}) ROUNDS times round-robin,
        each into a fresh folder, and checks each run: its exit status (0, or one of ALLOWED_EXITS[tool]),
        then CHECK(slot) (a problem, or None). ENV: the runs' environment (or slot -> env);
        METERS ({label: () -> number or {key: count}}): read before and after every run, the
        difference kept; BEFORE_RUN(slot): untimed, what it returns kept with the run;
        REFERENCE: the tool whose first output every tool's first must equal in content."""
        if not tools:
            raise SystemExit(f"bench: {tag}: no tools to run")
        if settle:
            wait_for_fast_creates(self.work, self.smoke)
        if self.smoke:
            pass  # a smoke run measures nothing: the memory needs no preparing
        elif fill_memory:
            fill_free_memory(self.work)
        else:
            free_memory(hot)
        warn_if_busy()
        names, rows = list(tools), []
        rounds = rounds or self.rounds
        warmup = 0 if self.smoke else self.args.warmup
        say(f"{tag}: {len(names)} tools, {rounds} rounds (+{warmup} warmup), round-robin")
        for r in range(-warmup, rounds):
            for k in range(len(names)):
                tool = names[(r + k) % len(names)]
                rid = f"{tag}-r{r}-{tool}".translate(str.maketrans(" |+/", "____"))
                out = Path(out_root or self.work / "out") / rid
                if make_out:
                    out.mkdir(parents=True)  # fails if it exists: every run's folder is new
                slot = Slot(tool, r, out, rid)
                if sync:
                    os.sync()  # the previous run's writes land now, untimed
                extra = (before_run(slot) if before_run else None) or {}
                before = {label: m() for label, m in (meters or {}).items()}
                log = self.work / "logs" / f"{rid}.log"
                log.parent.mkdir(exist_ok=True)
                run_env = env(slot) if callable(env) else env
                argv = tools[tool](slot)  # a list of words, or a command line to split into them
                argv = shlex.split(argv) if isinstance(argv, str) else argv
                row = timed(argv, log, self.args.timeout, run_env)
                for label, m in (meters or {}).items():
                    row[label] = difference(m(), before[label])
                problem = None
                if row["exit"] not in (allowed_exits or {}).get(tool, (0,)):
                    problem = f"exit {row['exit']}" + (" (timed out)" if row["timed_out"] else "")
                    problem += f": {log.read_text(errors='replace')[-300:].strip()}"
                elif check:
                    problem = (check[tool] if isinstance(check, dict) else check)(slot)
                row.update(
                    extra,
                    **slot.extra,
                    bench=self.name,
                    batch=tag,
                    round=r,
                    tool=tool,
                    out=str(out),
                )
                row.update(warmup=r < 0, status="ok" if problem is None else f"FAILED: {problem}")
                rows.append(row)
                say(f"{tag} r{r} {tool:<24} {row['wall']:7.2f} s  CPU {row['cpu']:6.2f} s  "
                    f"{row['status'][:200]}")  # fmt: skip
        if settle and probe_ms(self.work / ".probe" / f"after-{tag}") > PROBE_MS:
            say(f"{tag}: WARNING: file creation got slow during the batch: suspect these timings")
        if reference:
            self.same_content(rows, reference)
        self.rows += rows
        self.failures += [f"{r['batch']} r{r['round']} {r['tool']}: {r['status']}" for r in rows
                          if r["status"] != "ok"]  # fmt: skip
        return rows

    def same_content(self, rows, reference):
        """Every tool's first good output against REFERENCE's (a tool), or a folder's."""
        first = {}
        for r in rows:
            if r["status"] == "ok":
                first.setdefault(r["tool"], r)
        if isinstance(reference, Path):
            first[reference] = {"out": reference}
        if reference not in first:
            return
        from .trees import same_content

        for tool, r in first.items():
            problem = same_content(first[reference]["out"], r["out"]) if tool != reference else None
            if problem:
                r["status"] = f"FAILED: content differs from {reference}'s: {problem}"

    def clean(self):
        """Deletes the outputs so far (between batches that would not fit on the disk
        together); the next batch waits for fast creates again."""
        if not self.keep_outputs():
            fixtures.delete(self.work / "out")

    def keep_outputs(self):
        return self.args.keep or bool(self.failures)

    def save(self, text):
        """The report: printed, and kept in the results with every run's row."""
        print(text, flush=True)
        path = self.results / f"{self.name}-{self.stamp}"
        with open(f"{path}.md", "a") as f:
            f.write(text + "\n")
        Path(f"{path}.json").write_text(json.dumps(self.rows, indent=1, default=str))
        say(f"results: {path}.md, {path}.json")

    def finish(self):
        if self.failures:
            say(f"FAILED: {len(self.failures)} runs; outputs and logs kept in {self.work}")
            for f in self.failures:
                say(f"  {f[:400]}")
            raise SystemExit(1)
        if self.args.keep:
            return say(f"outputs kept in {self.work}")
        fixtures.delete(self.work)


def difference(after, before):
    if isinstance(after, dict):
        return {k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0)}
    return after - before


def arguments_for(name, module):
    parser = argparse.ArgumentParser(
        prog=f"benches/bench.py {name}",
        description=module.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common_arguments(parser, getattr(module, "ROUNDS", 3))
    if hasattr(module, "arguments"):
        module.arguments(parser)
    return parser
