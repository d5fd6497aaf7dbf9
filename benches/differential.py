#!/usr/bin/env python3
"""Differential run: fastwrite against the reference extractors, from a file and through a pipe.

For each archive in the folders given (files ending in .md are skipped), in a fresh temporary
folder of its own, deleted after:

- fastwrite extracts it from the file (`fastwrite extract ARCHIVE -o OUT --devices`) and through
  a real pipe (`fastwrite extract - -o OUT --devices`, standard input not seekable; rerun with
  `--name single` when it asks for a name). Its working folder is the archive's work folder, and
  whatever appears there besides its output folders is an escape.
- The references extract it from the file: GNU tar and bsdtar for a tar (or a compressed file),
  Info-ZIP's unzip, bsdtar and 7-Zip for a zip (a zip: starts with "PK", or has an end record in
  its last 66,000 bytes, as tests/corpus.rs decides). For a zip, `bsdtar -xpf -` through a pipe
  is also recorded (not a reference: it shows what a streaming reader gets).
  Every run has TZ=UTC0 and a timeout; the references also a 2 GiB address-space bound and a
  1 GiB file-size bound (prlimit). A reference that fails, times out or is killed gives no tree.
- The references agree when two or more of them exit 0 with identical trees. Trees are compared
  by relative path, type (file, dir, symlink, other), file contents and symlink targets; not by
  modes, times or owners.

Counted per mode (file, pipe), as tests/corpus.rs judges the file mode:
- differs: the references agree and fastwrite's tree is another (whatever its exit code), except
  where the tar references agree on an empty tree and fastwrite wrote one regular file, exit 0
  (a single compressed file, decompressed);
- nonzero: the references agree and fastwrite exited non-zero;
- crashes: an exit code other than 0, 1 or 2, a signal, a timeout, or "panicked" on stderr;
- escapes: anything written in the work folder outside fastwrite's output folders.
An archive where any tree holds a file over 64 MiB (as tests/corpus.rs) or a path over 3,000
bytes (too deep to walk by whole paths) is not compared.

Usage:
  benches/differential.py --fastwrite target/release/fastwrite DIR... [--jobs 1] [--json OUT]
      [--timeout 60]
  benches/differential.py --compare BEFORE.json AFTER.json
"""

import argparse
import concurrent.futures
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile

TIMEOUT = 60  # seconds; --timeout
HUGE = 64 << 20
MAX_PATH = 3000
REFERENCE_LIMITS = ["prlimit", "--as=2147483648", "--fsize=1073741824"]
MODES = ("file", "pipe")
FASTWRITE_OUTS = {"fastwrite-file", "fastwrite-pipe", "fastwrite-pipe-named"}
# References not run on an archive, as in tests/corpus.rs: what they write is too large.
NOT_RUN = {
    ("la__libarchive__test__test_read_format_zip_uncompressed_size_off_by_4gib.zip", "bsdtar")
}
TAR_REFERENCES = {
    "tar": lambda a, d: ["tar", "-xpf", a, "-C", d],
    "bsdtar": lambda a, d: ["bsdtar", "-xpf", a, "-C", d],
}
ZIP_REFERENCES = {
    "unzip": lambda a, d: ["unzip", "-qo", a, "-d", d],
    "bsdtar": lambda a, d: ["bsdtar", "-xpf", a, "-C", d],
    "7z": lambda a, d: ["7z", "x", "-y", "-p", "-o" + d, a],
}


def run(cmd, cwd, stdin_bytes=None):
    """Run cmd with TZ=UTC0 and the timeout; (exit code or None if timed out, stderr text).
    A signal gives a negative code. stdin_bytes go through a pipe."""
    env = dict(os.environ, TZ="UTC0")
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        start_new_session=True,
        stdin=subprocess.PIPE if stdin_bytes is not None else subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _, err = proc.communicate(stdin_bytes, timeout=TIMEOUT)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        code = None
    return code, err.decode("utf-8", "backslashreplace")


def is_zip(data):
    return data.startswith(b"PK") or b"PK\x05\x06" in data[-66000:]


def show(path):
    """A path as printable text, odd bytes as \\xNN."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


class TooDeep(Exception):
    """A tree holding a path too long to walk by whole paths."""


def walk(root):
    """(relative path, os.DirEntry) of everything under root, without recursion and without
    following links. TooDeep for a path over MAX_PATH bytes (node-tar's excessively-deep.tar)."""
    stack = [""]
    while stack:
        rel = stack.pop()
        with os.scandir(os.path.join(root, rel)) as entries:
            for entry in entries:
                path = os.path.join(rel, entry.name)
                if len(os.fsencode(path)) > MAX_PATH:
                    raise TooDeep(f"a path over {MAX_PATH} bytes")
                yield path, entry
                if entry.is_dir(follow_symlinks=False):
                    stack.append(path)


def file_hash(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def scan(root):
    """{relative path: (kind, detail)}: a file's sha256, a symlink's target."""
    tree = {}
    for path, entry in walk(root):
        if entry.is_symlink():
            tree[show(path)] = ("symlink", show(os.readlink(entry.path)))
        elif entry.is_dir(follow_symlinks=False):
            tree[show(path)] = ("dir", None)
        elif entry.is_file(follow_symlinks=False):
            tree[show(path)] = ("file", file_hash(entry.path))
        else:
            tree[show(path)] = ("other", None)
    return tree


def diff(expected, actual):
    """Lines naming each difference between two scanned trees (empty: the same)."""
    lines = []
    for path, (kind, detail) in sorted(expected.items()):
        got = actual.get(path)
        if got is None:
            lines.append(f"missing: {path} ({kind})")
        elif got[0] != kind:
            lines.append(f"kind differs: {path}: expected {kind}, got {got[0]}")
        elif got[1] != detail:
            lines.append(f"{'content' if kind == 'file' else 'target'} differs: {path}")
    lines += [f"extra: {p} ({k})" for p, (k, _) in sorted(actual.items()) if p not in expected]
    return lines


def holds_huge_file(root):
    return any(
        entry.is_file(follow_symlinks=False) and entry.stat().st_size > HUGE
        for _, entry in walk(root)
    )


def fresh(work, name):
    path = os.path.join(work, name)
    os.mkdir(path)
    return path


def outside(work):
    """What is in the work folder besides fastwrite's output folders."""
    return {show(n) for n in os.listdir(work) if n not in FASTWRITE_OUTS}


def run_fastwrite(fastwrite, archive, data, work):
    """fastwrite from the file and through a pipe: {mode: (exit code, stderr, out folder,
    what it wrote outside OUT)}."""
    out = fresh(work, "fastwrite-file")
    code, err = run([fastwrite, "extract", archive, "-o", out, "--devices"], work)
    runs = {"file": (code, err, out, outside(work))}
    out = fresh(work, "fastwrite-pipe")
    code, err = run([fastwrite, "extract", "-", "-o", out, "--devices"], work, data)
    if "with no name inside: give it one with --name" in err:
        out = fresh(work, "fastwrite-pipe-named")
        code, err = run(
            [fastwrite, "extract", "-", "-o", out, "--devices", "--name", "single"], work, data
        )
    runs["pipe"] = (code, err, out, outside(work) - runs["file"][3])
    return runs


def crash(code, err):
    """Why a fastwrite run counts as a crash, or None."""
    if code is None:
        return "timeout"
    if code < 0:
        return f"signal {-code}"
    if code not in (0, 1, 2):
        return f"exit {code}"
    if "panicked" in err:
        return "panicked"
    return None


def run_references(name, archive, data, work, zip_):
    """{reference: exit code} and the trees of those that exited 0."""
    exits, trees = {}, {}
    for ref, args in (ZIP_REFERENCES if zip_ else TAR_REFERENCES).items():
        if (name, ref) in NOT_RUN:
            continue
        dest = fresh(work, "ref-" + ref)
        exits[ref], _ = run(REFERENCE_LIMITS + args(archive, dest), dest)
        if exits[ref] == 0:
            trees[ref] = dest
    if zip_:
        dest = fresh(work, "ref-bsdtar-pipe")
        exits["bsdtar-pipe"], _ = run(
            REFERENCE_LIMITS + ["bsdtar", "-xpf", "-", "-C", dest], dest, data
        )
        trees["bsdtar-pipe"] = dest if exits["bsdtar-pipe"] == 0 else None
    return exits, trees


def judge(agreed, tree, code, zip_):
    """(differs, diff lines) of one fastwrite tree against the agreed one."""
    lines = diff(agreed, tree)
    single = (
        not agreed
        and not zip_
        and code == 0
        and len(tree) == 1
        and next(iter(tree.values()))[0] == "file"
    )
    return bool(lines) and not single, lines


def check(fastwrite, archive, root):
    """Everything found on one archive, as a dict."""
    name = os.path.basename(archive)
    with open(archive, "rb") as f:
        data = f.read()
    zip_ = is_zip(data)
    work = tempfile.mkdtemp(prefix="work-", dir=root)
    try:
        result = {"kind": "zip" if zip_ else "tar", "modes": {}}
        fw = run_fastwrite(fastwrite, archive, data, work)
        for mode, (code, err, _, escapes) in fw.items():
            first = next((l for l in err.splitlines() if l.strip()), "")[:500]
            result["modes"][mode] = {
                "exit": code,
                "stderr": first,
                "crash": crash(code, err),
                "escapes": sorted(escapes),
                "differs": False,
                "nonzero": False,
                "diff": [],
            }
        if any(holds_huge_file(out) for _, _, out, _ in fw.values()):
            result["skipped"] = "fastwrite wrote a file over 64 MiB"
            return name, result
        exits, trees = run_references(name, archive, data, work, zip_)
        result["references"] = exits
        piped = trees.pop("bsdtar-pipe", None)
        if any(holds_huge_file(t) for t in trees.values()):
            result["skipped"] = "a reference wrote a file over 64 MiB"
            return name, result
        scanned = {ref: scan(t) for ref, t in trees.items()}
        first = next(iter(scanned.values()), None)
        result["agree"] = len(scanned) >= 2 and all(t == first for t in scanned.values())
        if not result["agree"]:
            return name, result
        if zip_:
            result["bsdtar_pipe_differs"] = (
                piped is None or holds_huge_file(piped) or scan(piped) != first
            )
        for mode, (code, _, out, _) in fw.items():
            differs, lines = judge(first, scan(out), code, zip_)
            result["modes"][mode].update(
                differs=differs, nonzero=code != 0, diff=lines[:20] if differs else []
            )
        return name, result
    except TooDeep as e:
        result["skipped"] = str(e)
        return name, result
    finally:
        remove(work)


def remove(root):
    """Delete a tree, however deep, opening up folders an archive left unreadable (chmod -R
    follows no link)."""
    subprocess.run(["chmod", "-R", "u+rwx", root], stderr=subprocess.DEVNULL, timeout=600)
    subprocess.run(["rm", "-rf", root], timeout=600)


def archives_in(dirs):
    found = {}
    for d in dirs:
        for n in sorted(os.listdir(d)):
            path = os.path.join(d, n)
            if os.path.isfile(path) and not n.endswith(".md"):
                if n in found:
                    sys.exit(f"two archives named {n}: {found[n]} and {path}")
                found[n] = path
    return found


def summarize(results):
    """{mode: {count: n}} over all archives; plus what bsdtar -xf - loses on zips."""
    summary = {
        "archives": len(results),
        "agree": sum(bool(r.get("agree")) for r in results.values()),
        "skipped": sum("skipped" in r for r in results.values()),
        "bsdtar_pipe_differs": sum(bool(r.get("bsdtar_pipe_differs")) for r in results.values()),
    }
    for mode in MODES:
        rows = [r["modes"][mode] for r in results.values()]
        summary[mode] = {
            "differs": sum(m["differs"] for m in rows),
            "nonzero": sum(m["nonzero"] for m in rows),
            "crashes": sum(bool(m["crash"]) for m in rows),
            "escapes": sum(bool(m["escapes"]) for m in rows),
        }
    return summary


def report(results, summary):
    print(
        f"{summary['archives']} archives; the references agree on {summary['agree']}; "
        f"{summary['skipped']} not compared (listed last)"
    )
    print(f"{'mode':6} {'differs':>8} {'nonzero':>8} {'crashes':>8} {'escapes':>8}")
    for mode in MODES:
        s = summary[mode]
        print(f"{mode:6} {s['differs']:8} {s['nonzero']:8} {s['crashes']:8} {s['escapes']:8}")
    print(
        f"zips where the references agree and `bsdtar -xpf -` differs: "
        f"{summary['bsdtar_pipe_differs']}"
    )
    for name, r in sorted(results.items()):
        for mode in MODES:
            m = r["modes"][mode]
            if m["differs"] or m["nonzero"] or m["crash"]:
                what = "; ".join(m["diff"][:3]) or "same tree"
                print(
                    f"  {name} [{mode}] exit {m['exit']}{' CRASH ' + m['crash'] if m['crash'] else ''}"
                    f": {what} | {m['stderr'][:160]}"
                )
            if m["escapes"]:
                print(f"  {name} [{mode}]: written outside OUT: {m['escapes']}")
    for name, r in sorted(results.items()):
        if "skipped" in r:
            print(f"  not compared: {name}: {r['skipped']}")


def compare(before_path, after_path):
    """Print each archive and mode whose verdict changed between two --json outputs."""
    with open(before_path) as f:
        before = json.load(f)
    with open(after_path) as f:
        after = json.load(f)
    print(f"the references agree: {before['summary']['agree']} -> {after['summary']['agree']}")
    for key in ("file", "pipe"):
        print(
            f"{key}: "
            + ", ".join(
                f"{c} {before['summary'][key][c]} -> {after['summary'][key][c]}"
                for c in ("differs", "nonzero", "crashes", "escapes")
            )
        )
    verdict = lambda m: (m["differs"], m["nonzero"], m["crash"], m["exit"], bool(m["escapes"]))
    for name in sorted(set(before["archives"]) | set(after["archives"])):
        b, a = before["archives"].get(name), after["archives"].get(name)
        if b is None or a is None:
            print(f"  {name}: only in {'after' if b is None else 'before'}")
            continue
        if b.get("agree") != a.get("agree"):
            print(
                f"  {name}: the references agree {b.get('agree')} -> {a.get('agree')}"
                f" (exit codes {b.get('references')} -> {a.get('references')})"
            )
        for mode in MODES:
            vb, va = verdict(b["modes"][mode]), verdict(a["modes"][mode])
            if vb != va:
                print(
                    f"  {name} [{mode}]: differs/nonzero/crash/exit/escaped {vb} -> {va}"
                    f" | {a['modes'][mode]['stderr'][:120]}"
                )


def main():
    global TIMEOUT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fastwrite", help="the fastwrite binary")
    parser.add_argument("--jobs", type=int, default=1, help="archives at once (default 1)")
    parser.add_argument("--json", help="write every result here")
    parser.add_argument(
        "--timeout", type=int, default=TIMEOUT, help=f"seconds a run may take (default {TIMEOUT})"
    )
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    parser.add_argument("dirs", nargs="*", help="folders of archives")
    args = parser.parse_args()
    sys.stdout.reconfigure(errors="backslashreplace")
    if args.compare:
        return compare(*args.compare)
    if not args.fastwrite or not args.dirs:
        parser.error("--fastwrite and at least one folder are needed")
    TIMEOUT = args.timeout
    fastwrite = os.path.abspath(args.fastwrite)
    archives = archives_in(args.dirs)
    root = tempfile.mkdtemp(prefix="fastwrite-differential-")
    try:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            results = {}
            for name, result in pool.map(lambda a: check(fastwrite, a, root), archives.values()):
                results[name] = result
                if len(results) % 50 == 0:
                    print(f"{len(results)} of {len(archives)}", file=sys.stderr, flush=True)
    finally:
        remove(root)
    summary = summarize(results)
    report(results, summary)
    if args.json:
        version = subprocess.run([fastwrite, "--version"], capture_output=True, text=True).stdout
        with open(args.json, "w") as f:
            json.dump(
                {
                    "fastwrite": version.strip(),
                    "dirs": args.dirs,
                    "summary": summary,
                    "archives": results,
                },
                f,
                indent=1,
                sort_keys=True,
            )


if __name__ == "__main__":
    main()
