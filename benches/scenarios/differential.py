"""Differential run: fastwrite against the reference extractors, from a file and through a pipe.

    benches/bench.py differential [--fastwrite BIN] DIR... [--jobs 1] [--json OUT] [--timeout 60]
    benches/bench.py differential --compare BEFORE.json AFTER.json

Each archive of the folders (not *.md), in a temporary folder: fastwrite from the file and
through a pipe (--devices; `--name single` when it asks for one); the references from the file
(GNU tar, bsdtar; for a zip as tests/corpus.rs decides, unzip, bsdtar, 7-Zip), with TZ=UTC0, the
timeout, 2 GiB of memory, 1 GiB files. They agree when two or more exit 0 with trees `diff -r`
finds the same. Per mode: differs (they agree, fastwrite's tree is another; not a tar they
leave empty where fastwrite wrote one file: a compressed file), nonzero, crashes (an exit but
0-2, a signal, a timeout, "panicked"), escapes (written beside the outputs). Not compared: a
tree with a file over 64 MiB or a path over 3,000 bytes. --smoke: tests/data/corpus.
"""

import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import tempfile

from harness import fixtures

TIMED, TIMEOUT, MODES = False, 60, ("file", "pipe")
COUNTS = {"differs": "differs", "nonzero": "nonzero", "crashes": "crash", "escapes": "escapes"}
LIMITS = "prlimit --as=2147483648 --fsize=1073741824".split()
OURS = {"fastwrite-file", "fastwrite-pipe", "fastwrite-pipe-named"}
# Not run, as in tests/corpus.rs: what it writes is too large.
NOT_RUN = {("la__libarchive__test__test_read_format_zip_uncompressed_size_off_by_4gib.zip", "bsdtar")}
TAR = {"tar": "tar -xpf {a} -C {d}", "bsdtar": "bsdtar -xpf {a} -C {d}"}
ZIP = {"unzip": "unzip -qo {a} -d {d}", "bsdtar": "bsdtar -xpf {a} -C {d}", "7z": "7z x -y -p -o{d} {a}"}


def arguments(p):
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--json")
    p.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    p.add_argument("dirs", nargs="*")


def run(cmd, cwd, timeout, data=None):
    """(exit code: None if timed out, a signal negative; stderr); DATA through a pipe."""
    stdin = subprocess.PIPE if data is not None else subprocess.DEVNULL
    io = {"stdin": stdin, "stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE}
    proc = subprocess.Popen(cmd, cwd=cwd, env=dict(os.environ, TZ="UTC0"), start_new_session=True, **io)
    try:
        err, code = proc.communicate(data, timeout=timeout)[1], proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        err, code = proc.communicate()[1], None
    return code, err.decode("utf-8", "backslashreplace")


def not_comparable(root):
    # A folder at a time from a list, not os.walk: Python 3.11's recurses, and a tree 222,370
    # folders deep (bsdtar's of node-tar's excessively-deep.tar) is past its recursion limit.
    folders = [root]
    while folders:
        folder = folders.pop()
        if len(os.fsencode(os.path.relpath(folder, root))) > 2900:
            return "a path over 3,000 bytes"
        with os.scandir(folder) as entries:
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    folders.append(e.path)
                elif e.is_file(follow_symlinks=False) and e.stat(follow_symlinks=False).st_size > 64 << 20:
                    return "a file over 64 MiB"
    return None


def diff(a, b):
    """The lines in which trees A and B differ (paths, kinds, contents, symlink targets)."""
    done = subprocess.run(["diff", "-rq", "--no-dereference", a, b], capture_output=True, timeout=600)
    lines = done.stdout.decode("utf-8", "backslashreplace").replace(a, "REFS").replace(b, "OUT")
    return ["diff could not compare them"] if done.returncode == 2 else lines.splitlines()


def crash(code, err):
    if code is None or code < 0 or code > 2:
        return "timeout" if code is None else f"signal {-code}" if code < 0 else f"exit {code}"
    return "panicked" if "panicked" in err else None


def check(fastwrite, archive, root, timeout):
    """Everything found on one archive."""
    name, work, result = os.path.basename(archive), tempfile.mkdtemp(prefix="work-", dir=root), {}
    with open(archive, "rb") as f:
        data = f.read()
    zip_ = data.startswith(b"PK") or b"PK\x05\x06" in data[-66000:]

    def fresh(sub):
        os.mkdir(f"{work}/{sub}")
        return f"{work}/{sub}"

    def ours(out, *more, data=None):
        cmd = [fastwrite, "extract", "-" if data else archive, "-o", fresh(out), "--devices", *more]
        return (*run(cmd, work, timeout, data), f"{work}/{out}")

    def beside():
        return {os.fsencode(n).decode("utf-8", "backslashreplace") for n in os.listdir(work) if n not in OURS}

    try:
        runs = {"file": (*ours("fastwrite-file"), beside())}
        piped = ours("fastwrite-pipe", data=data)
        if "with no name inside: give it one with --name" in piped[1]:
            piped = ours("fastwrite-pipe-named", "--name", "single", data=data)
        runs["pipe"] = (*piped, beside() - runs["file"][3])
        result = {"kind": "zip" if zip_ else "tar", "modes": {}}
        for mode, (code, err, _, escapes) in runs.items():
            first = next((line for line in err.splitlines() if line.strip()), "")[:500]
            result["modes"][mode] = {"exit": code, "stderr": first, "crash": crash(code, err)}
            result["modes"][mode] |= {"escapes": sorted(escapes), "differs": False, "nonzero": False, "diff": []}
        exits, trees = {}, []
        for ref, cmd in (ZIP if zip_ else TAR).items():
            if (name, ref) not in NOT_RUN:
                d = fresh(f"ref-{ref}")
                exits[ref] = run(LIMITS + cmd.format(a=archive, d=d).split(" "), d, timeout)[0]
                trees += [d] if exits[ref] == 0 else []
        if zip_:  # not a reference: what a streaming reader gets
            exits["bsdtar-pipe"] = run(LIMITS + ["bsdtar", "-xpf", "-", "-C", fresh("ref-pipe")], work, timeout, data)[
                0
            ]
        result["references"] = exits
        for tree in [r[2] for r in runs.values()] + trees:
            if reason := not_comparable(tree):
                return name, result | {"skipped": f"{os.path.basename(tree)} holds {reason}"}
        result["agree"] = len(trees) >= 2 and all(diff(trees[0], t) == [] for t in trees[1:])
        if not result["agree"]:
            return name, result
        if zip_:
            result["bsdtar_pipe_differs"] = exits["bsdtar-pipe"] != 0 or diff(trees[0], f"{work}/ref-pipe") != []
        for mode, (code, _, out, _) in runs.items():
            lines, got = diff(trees[0], out), os.listdir(out)
            # A single compressed file: the tar references write nothing, fastwrite the file.
            single = not zip_ and not os.listdir(trees[0]) and code == 0 and len(got) == 1
            single = single and os.path.isfile(f"{out}/{got[0]}")
            m = result["modes"][mode]
            m |= {"differs": bool(lines) and not single, "nonzero": code != 0, "diff": [] if single else lines[:20]}
        return name, result
    finally:
        remove(work)


def remove(root):
    """Deletes a tree however deep, opening what an archive left unreadable first."""
    subprocess.run(["chmod", "-R", "u+rwx", root], stderr=subprocess.DEVNULL, timeout=600)
    subprocess.run(["rm", "-rf", root], timeout=600)


def summarize(results):
    rows = results.values()
    summary = {"archives": len(results), "agree": sum(bool(r.get("agree")) for r in rows)}
    summary["skipped"] = sum("skipped" in r for r in rows)
    summary["bsdtar_pipe_differs"] = sum(bool(r.get("bsdtar_pipe_differs")) for r in rows)
    for mode in MODES:
        summary[mode] = {k: sum(bool(r["modes"][mode][f]) for r in rows) for k, f in COUNTS.items()}
    return summary


def report(results, summary):
    print(f"{summary['archives']} archives; the references agree on {summary['agree']}; ", end="")
    print(f"{summary['skipped']} not compared (listed last)")
    print(f"{'mode':6} " + " ".join(f"{c:>8}" for c in COUNTS))
    for mode in MODES:
        print(f"{mode:6} " + " ".join(f"{summary[mode][c]:8}" for c in COUNTS))
    print(f"zips where they agree and `bsdtar -xpf -` differs: {summary['bsdtar_pipe_differs']}")
    for name, r in sorted(results.items()):
        for mode, m in r["modes"].items():
            if m["differs"] or m["nonzero"] or m["crash"]:
                crashed = f" CRASH {m['crash']}" if m["crash"] else ""
                what = "; ".join(m["diff"][:3]) or "same tree"
                print(f"  {name} [{mode}] exit {m['exit']}{crashed}: {what} | {m['stderr'][:160]}")
            if m["escapes"]:
                print(f"  {name} [{mode}]: written outside OUT: {m['escapes']}")
    for name, r in sorted(results.items()):
        if "skipped" in r:
            print(f"  not compared: {name}: {r['skipped']}")


def compare(before_path, after_path):
    """Each archive and mode whose verdict changed between two --json outputs."""
    with open(before_path) as a, open(after_path) as b:
        before, after = json.load(a), json.load(b)
    print(f"the references agree: {before['summary']['agree']} -> {after['summary']['agree']}")
    for mode in MODES:
        was, now = before["summary"][mode], after["summary"][mode]
        print(f"{mode}: " + ", ".join(f"{c} {was[c]} -> {now[c]}" for c in COUNTS))

    def verdict(m):
        return m["differs"], m["nonzero"], m["crash"], m["exit"], bool(m["escapes"])

    for name in sorted(set(before["archives"]) | set(after["archives"])):
        b, a = before["archives"].get(name), after["archives"].get(name)
        if b is None or a is None:
            print(f"  {name}: only in {'after' if b is None else 'before'}")
            continue
        if b.get("agree") != a.get("agree"):
            print(f"  {name}: the references agree {b.get('agree')} -> {a.get('agree')}", end="")
            print(f" (exit codes {b.get('references')} -> {a.get('references')})")
        for mode in MODES:
            if (was := verdict(b["modes"][mode])) != (now := verdict(a["modes"][mode])):
                print(f"  {name} [{mode}]: differs/nonzero/crash/exit/escaped {was} -> {now}", end="")
                print(f" | {a['modes'][mode]['stderr'][:120]}")


def main(args):
    sys.stdout.reconfigure(errors="backslashreplace")
    if args.compare:
        return compare(*args.compare)
    dirs = args.dirs or ([fixtures.REPO / "tests/data/corpus"] if args.smoke else [])
    archives = {}
    for d in dirs or exit("bench: differential: which folders of archives?"):
        for n in sorted(os.listdir(d)):
            if os.path.isfile(f"{d}/{n}") and not n.endswith(".md"):
                if n in archives:
                    raise SystemExit(f"two archives named {n}: {archives[n]} and {d}/{n}")
                archives[n] = f"{d}/{n}"
    fastwrite, root = (fixtures.fastwrite(args.fastwrite), tempfile.mkdtemp(prefix="fastwrite-differential-"))
    try:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            results = dict(pool.map(lambda a: check(fastwrite, a, root, args.timeout), archives.values()))
    finally:
        remove(root)
    summary = summarize(results)
    report(results, summary)
    if args.json:
        out = {"fastwrite": fixtures.version([fastwrite, "--version"]), "dirs": [str(d) for d in dirs]}
        with open(args.json, "w") as f:
            json.dump(out | {"summary": summary, "archives": results}, f, indent=1, sort_keys=True)
