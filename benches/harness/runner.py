"""The one runner: every timed run of every bench goes through `Bench.batch`, so every bench
measures the same way.

- Round-robin: each round runs every tool once, each round starting one tool further on (A B,
  B A, ...), so no tool has its runs in a row and each gets each place in the order.
- A fresh folder (or bucket prefix) for every run, never deleted during the bench: on these
  machines' journal-less ext4 a delete makes creating files 4-14x slower for up to 6 minutes
  (FIELD-NOTES, "Benchmark trap"); so before each batch the creation probe must be fast again.
  Or, with `fresh_fs` (`--fresh-fs SIZE`), a freshly made ext4 for every run (a sparse loop
  file, `mkfs.ext4`, mounted, checked, then unmounted and thrown away): no earlier delete can
  slow it, whatever ran before, and the fastest tool's ratio is not bent by the disk's age.
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
    """One run: its tool, round, fresh output folder, an id to name a prefix by, and what a
    check or BEFORE_RUN finds worth keeping with the run."""

    tool: str
    round: int
    out: Path
    id: str
    extra: dict = field(default_factory=dict)


def timed(argv, log, timeout, env=None):
    """Runs ARGV (its output to LOG), killed with its group after TIMEOUT seconds; under GNU
    time for the peak RSS (a child of this process would report this process's pages until it
    execs; GNU time is small, and the same for every tool)."""
    rss, late = Path(f"{log}.rss"), []
    with open(log, "wb") as out:
        t0 = time.perf_counter()
        argv = [str(a) for a in ["/usr/bin/time", "-q", "-f", "%M", "-o", rss, *argv]]
        pipes = {"stdin": subprocess.DEVNULL, "stdout": out, "stderr": subprocess.STDOUT}
        proc = subprocess.Popen(argv, env=env, start_new_session=True, **pipes)

        def kill():
            late.append(True)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        killer = threading.Timer(timeout, kill)
        killer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        killer.cancel()
    cpu, code = usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status)
    proc.returncode = code
    rss_kib = int((rss.read_text().split() or [0])[-1]) if rss.exists() else 0
    row = {"wall": wall, "user": usage.ru_utime, "sys": usage.ru_stime, "cpu": cpu, "exit": code}
    return row | {"rss_kib": rss_kib, "timed_out": bool(late)}


def probe_ms(root):
    """Milliseconds to create 2,000 empty files in 100 new folders under ROOT (touching as many
    block groups as an extraction). Left in place: deleting them re-arms the delay."""
    root.mkdir(parents=True)
    t = time.perf_counter()
    for d in range(100):
        os.mkdir(root / str(d))
        for f in range(20):
            os.close(os.open(root / str(d) / str(f), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644))
    return round((time.perf_counter() - t) * 1000)


def wait_for_fast_creates(work, smoke=False):
    """Waits out our own last delete (the probe cannot tell until the deleted inodes' blocks are
    dirty again), then until the probe is fast (anybody's deletes), re-probing every 15 s."""
    age = time.time() - SETTLE_MARKER.stat().st_mtime if SETTLE_MARKER.exists() else SETTLE
    if age < SETTLE and not smoke:
        say(f"a bench deleted its outputs {age:.0f} s ago; waiting {SETTLE - age:.0f} s")
        time.sleep(SETTLE - age)
    start, n = time.monotonic(), len(list((work / ".probe").glob("*")))
    while True:
        ms = probe_ms(work / ".probe" / str(n))
        n += 1
        if ms <= PROBE_MS:
            return say(f"file-creation probe: {ms} ms for 2,000 files (ok, <= {PROBE_MS})")
        if smoke or time.monotonic() - start >= SETTLE_MAX:
            return say(f"WARNING: file creation is slow ({ms} ms for 2,000 files): timings skewed")
        say(f"file-creation probe: {ms} ms for 2,000 files (> {PROBE_MS}); again in 15 s")
        time.sleep(15)


@contextlib.contextmanager
def fresh_filesystem(slot, size):
    """A freshly made ext4 of SIZE (a sparse loop file beside SLOT's folder) mounted for the
    run, with SLOT's folder inside it; unmounted and thrown away after the run's check. Keeps
    in SLOT's extra `written/data`: what the device was written (ext4's lifetime_write_kbytes,
    after a sync) over the bytes of the files left in it, each inode once; a temporary file
    deleted before the kernel wrote it back costs nothing there."""
    image, mount = slot.out.parent / f"{slot.id}.ext4", slot.out.parent / f"{slot.id}.fs"
    mount.mkdir(parents=True)
    subprocess.run(["truncate", "-s", size, image], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", image], check=True)
    subprocess.run(["mount", "-o", "loop", image, mount], check=True)
    source = subprocess.run(["findmnt", "-n", "-o", "SOURCE", mount], capture_output=True, text=True)
    lifetime = Path("/sys/fs/ext4") / os.path.basename(source.stdout.strip()) / "lifetime_write_kbytes"
    written = lambda: int(lifetime.read_text()) if lifetime.exists() else 0  # noqa: E731
    os.sync()
    before = written()
    slot.out = mount / "out"
    try:
        yield
    finally:
        os.sync()
        data = file_bytes(mount)
        if data and lifetime.exists():
            slot.extra["written/data"] = round((written() - before) * 1024 / data, 2)
        subprocess.run(["umount", mount], check=False)
        image.unlink(missing_ok=True)


def file_bytes(root):
    """The bytes of the regular files under ROOT, each inode once."""
    seen, total = set(), 0
    for folder, _, files in os.walk(root):
        for name in files:
            st = os.lstat(os.path.join(folder, name))
            if (st.st_mode & 0o170000) == 0o100000 and (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def free_mib():
    line = next(x for x in Path("/proc/meminfo").read_text().splitlines() if x.startswith("MemFree"))
    return int(line.split()[1]) // 1024


def free_memory(hot):
    """With less than 4 GiB free, drops clean page cache (every run's pages would come from
    reclaim, whose cost depends on the machine's history) and reads HOT back in."""
    if free_mib() >= 4096 or not os.access("/proc/sys/vm/drop_caches", os.W_OK):
        return
    say(f"only {free_mib()} MiB free: dropping clean page cache, then reading the inputs again")
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("1")
    for path in hot:
        subprocess.run(["bash", "-c", f"find {q(path)} -type f -exec cat -- {{}} + >/dev/null"])


def fill_free_memory(work, keep_mib=1024):
    """Reads a sparse file the size of free memory but KEEP_MIB into the page cache, so that
    every run's pages come from reclaiming clean pages alike: on these VMs memory that sat free
    is slow to touch again (the host took it back), and which runs get it decides their times."""
    fill = free_mib() - keep_mib
    if fill >= 256:
        path = work / f".fill-{len(list(work.glob('.fill-*')))}"
        with open(path, "wb") as f:
            f.truncate(fill << 20)
        subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=1M", "status=none"], check=True)
        say(f"read {fill} MiB of zeros into the page cache: every run's pages come from reclaim")


def arguments_for(name, module):
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(f"benches/bench.py {name}", description=module.__doc__, formatter_class=raw)
    rounds = getattr(module, "ROUNDS", 3)
    parser.add_argument("-n", "--rounds", type=int, default=rounds, help=f"default {rounds}")
    parser.add_argument("--warmup", type=int, default=0, help="untimed rounds first (checked)")
    parser.add_argument("--smoke", action="store_true", help="one round of the smallest input")
    parser.add_argument("--tools", help="only these tools (comma-separated names)")
    parser.add_argument("--fastwrite", help="the binary (default: target/release/fastwrite)")
    timeout = getattr(module, "TIMEOUT", 600)
    parser.add_argument("--timeout", type=float, default=timeout, help=f"seconds a run may take ({timeout})")
    parser.add_argument("--keep", action="store_true", help="keep the outputs")
    parser.add_argument(
        "--fresh-fs", metavar="SIZE", help="each run into a freshly made ext4 of SIZE (root; e.g. 8G)"
    )
    if hasattr(module, "arguments"):
        module.arguments(parser)
    return parser


class Bench:
    """One bench's run: its work folder, its batches' rows, its failures, its results."""

    def __init__(self, name, args):
        self.name, self.args, self.smoke = name, args, args.smoke
        self.rounds = 1 if args.smoke else args.rounds
        self.stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
        self.work, self.results = CACHE / "work" / f"{name}-{self.stamp}", CACHE / "results"
        if not os.path.exists("/usr/bin/time"):
            raise SystemExit("bench: GNU time is required (apt-get install -y time)")
        self.work.mkdir(parents=True)
        self.results.mkdir(parents=True, exist_ok=True)
        self.rows, self.failures, self._fastwrite = [], [], None

    def fastwrite(self):
        self._fastwrite = self._fastwrite or fixtures.fastwrite(self.args.fastwrite)
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
        each into a fresh folder; checks each run: its exit (0, or one of ALLOWED_EXITS[tool]),
        then CHECK(slot) (or CHECK[tool](slot)): a problem, or None. ENV: the environment (or
        slot -> env). METERS ({label: () -> number or {key: count}}): read before and after each
        run, the difference kept. BEFORE_RUN(slot): untimed, before each. REFERENCE: a tool, or
        a folder, whose content every tool's first output must be. Its rows."""
        fresh_fs = getattr(self.args, "fresh_fs", None)
        if fresh_fs and reference:
            raise SystemExit("bench: --fresh-fs throws each tree away: no reference to compare")
        if settle and not fresh_fs:
            wait_for_fast_creates(self.work, self.smoke)
        if fill_memory and not self.smoke:  # (a smoke run measures nothing)
            fill_free_memory(self.work)
        elif not self.smoke:
            free_memory(hot)
        load = float(Path("/proc/loadavg").read_text().split()[0])
        if load > 0.5:
            say(f"WARNING: load average {load}: other work on this machine will skew the timings")
        names, rows, warmup = list(tools), [], 0 if self.smoke else self.args.warmup
        say(f"{tag}: {len(names)} tools, {rounds or self.rounds} rounds (+{warmup} warmup)")
        for r in range(-warmup, rounds or self.rounds):
            for k in range(len(names)):
                tool = names[(r + k) % len(names)]
                rid = f"{tag}-r{r}-{tool}".translate(str.maketrans(" |+/", "____"))
                slot = Slot(tool, r, Path(out_root or self.work / "out") / rid, rid)
                filesystem = fresh_filesystem(slot, fresh_fs) if fresh_fs else contextlib.nullcontext()
                with filesystem:
                    row = self._run(slot, tools, check, env=env, meters=meters, before_run=before_run,
                                    allowed_exits=allowed_exits, make_out=make_out, sync=sync)  # fmt: skip
                row |= slot.extra | {"bench": self.name, "batch": tag, "round": r, "tool": tool}
                row |= {"out": str(slot.out), "warmup": r < 0, "status": row.pop("problem")}
                rows.append(row)
                took = f"{row['wall']:7.2f} s  CPU {row['cpu']:6.2f} s"
                say(f"{tag} r{r} {tool:<24} {took}  {row['status'][:200]}")
        if settle and not fresh_fs and probe_ms(self.work / ".probe" / f"after-{tag}-{len(self.rows)}") > PROBE_MS:
            say(f"{tag}: WARNING: file creation got slow during the batch: suspect these timings")
        if reference:
            self.same_content(rows, reference)
        self.rows += rows
        self.failures += [f"{r['batch']} r{r['round']} {r['tool']}: {r['status']}" for r in rows if r["status"] != "ok"]
        return rows

    def _run(self, slot, tools, check, *, env, meters, before_run, allowed_exits, make_out, sync):
        """One timed run into SLOT, checked: its row, with `problem` ("ok" or why not)."""
        tool, rid = slot.tool, slot.id
        if make_out:
            slot.out.mkdir(parents=True)  # fails if it exists: every run's folder is new
        if sync:
            os.sync()  # the previous run's writes land now, untimed
        if before_run:
            before_run(slot)
        before = {label: m() for label, m in (meters or {}).items()}
        (self.work / "logs").mkdir(exist_ok=True)
        log = self.work / "logs" / f"{rid}.log"
        argv = tools[tool](slot)  # words, or a command line to split into them
        argv = shlex.split(argv) if isinstance(argv, str) else argv
        row = timed(argv, log, self.args.timeout, env(slot) if callable(env) else env)
        row |= {label: difference(m(), before[label]) for label, m in (meters or {}).items()}
        problem = None
        if row["exit"] not in (allowed_exits or {}).get(tool, (0,)):
            problem = f"exit {row['exit']}" + (" (timed out)" if row["timed_out"] else "")
            problem += f": {log.read_text(errors='replace')[-300:].strip()}"
        elif check:
            problem = (check[tool] if isinstance(check, dict) else check)(slot)
        return row | {"problem": f"FAILED: {problem}" if problem else "ok"}

    def same_content(self, rows, reference):
        from .trees import same_content

        first = {}
        for r in rows:
            if r["status"] == "ok":
                first.setdefault(r["tool"], r)
        ref = reference if isinstance(reference, Path) else first.get(reference, {}).get("out")
        for tool, r in first.items() if ref else ():
            if tool != reference and (problem := same_content(ref, r["out"])):
                r["status"] = f"FAILED: content differs from {reference}'s: {problem}"

    def clean(self):
        """Deletes the outputs so far (between batches that would not fit on the disk together);
        the next batch then waits for fast creates."""
        if not (self.args.keep or self.failures):
            fixtures.delete(self.work / "out")

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
