#!/usr/bin/env python3
"""Metadata checks for copy benchmarks (used by benches/mirror-peers.sh).

compare-trees.py compare SRC NAME=DIR... [--strict NAME,NAME...]
    For each copy DIR of the tree SRC, count what differs from SRC, by kind, and print one
    table row per copy. Content is not read here (`diff -r` does that); this checks what
    diff does not: types, sizes, symlink targets, permission bits, owners, mtimes (to the
    nanosecond; files, directories, symlinks and the top directory itself separately) and
    hard links (source files sharing an inode must share one in the copy).
    Exit status 1 when any copy misses entries, has extra ones, or has a different type,
    size or symlink target; or when a copy named in --strict differs in anything at all.
    The other copies' metadata differences are reported, not failed: peers differ in what
    they keep (e.g. fcp keeps no mtimes) and the table shows it.

compare-trees.py snapshot DIR FILE
compare-trees.py changed DIR FILE
    Record every entry's (inode, ctime) under DIR; then print how many entries were
    replaced (other inode), touched (same inode, new ctime: data, mode, owner or times
    were set, even to the same values), added or removed since. A copy tool's run that
    finds everything up to date should change none.
"""

import json
import os
import stat
import sys


def scan(root):
    """{relpath: os.stat_result} for root and everything under it (symlinks not followed)."""
    out = {".": os.lstat(root)}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            out[os.path.relpath(p, root)] = os.lstat(p)
    return out


def kind(st):
    m = st.st_mode
    return (
        "file"
        if stat.S_ISREG(m)
        else "dir"
        if stat.S_ISDIR(m)
        else "symlink"
        if stat.S_ISLNK(m)
        else "other"
    )


COLUMNS = [
    "missing",
    "extra",
    "type",
    "size/target",
    "mode",
    "owner",
    "file mtime",
    "dir mtime",
    "top mtime",
    "link mtime",
    "hardlinks",
]
STRUCTURAL = {"missing", "extra", "type", "size/target"}


def compare(src_root, src, dst_root):
    dst = scan(dst_root)
    diff = dict.fromkeys(COLUMNS, 0)
    examples = {}

    def note(col, path):
        diff[col] += 1
        examples.setdefault(col, path)

    for p in dst.keys() - src.keys():
        note("extra", p)
    groups = {}  # source inode -> copy inodes, for source files with several links
    for p, s in src.items():
        d = dst.get(p)
        if d is None:
            note("missing", p)
            continue
        k = kind(s)
        if kind(d) != k:
            note("type", p)
            continue
        if k == "file" and s.st_size != d.st_size:
            note("size/target", p)
        if k == "symlink" and (
            os.readlink(os.path.join(src_root, p)) != os.readlink(os.path.join(dst_root, p))
        ):
            note("size/target", p)
        if k != "symlink" and stat.S_IMODE(s.st_mode) != stat.S_IMODE(d.st_mode):
            note("mode", p)
        if (s.st_uid, s.st_gid) != (d.st_uid, d.st_gid):
            note("owner", p)
        if s.st_mtime_ns != d.st_mtime_ns:
            note(
                "top mtime"
                if p == "."
                else {"file": "file mtime", "dir": "dir mtime", "symlink": "link mtime"}.get(
                    k, "file mtime"
                ),
                p,
            )
        if k == "file" and s.st_nlink > 1:
            groups.setdefault(s.st_ino, set()).add(d.st_ino)
    diff["hardlinks"] = sum(1 for g in groups.values() if len(g) > 1)
    return diff, examples


def cmd_compare(args):
    strict = set()
    if "--strict" in args:
        i = args.index("--strict")
        strict = {n for n in args[i + 1].split(",") if n}
        del args[i : i + 2]
    src_root, pairs = args[0], [a.split("=", 1) for a in args[1:]]
    src = scan(src_root)
    counts = {k: sum(1 for s in src.values() if kind(s) == k) for k in ("file", "dir", "symlink")}
    links = sum(1 for s in src.values() if kind(s) == "file" and s.st_nlink > 1)
    print(
        f"fidelity vs {src_root} ({counts['file']} files, {counts['dir']} dirs, "
        f"{counts['symlink']} symlinks, {links} hard-linked files): entries that differ"
    )
    width = max(len(n) for n, _ in pairs) + 1
    print(f"{'tool':<{width}}" + "".join(f"{c:>12}" for c in COLUMNS))
    bad = []
    for name, root in pairs:
        diff, examples = compare(src_root, src, root)
        print(f"{name:<{width}}" + "".join(f"{diff[c]:>12}" for c in COLUMNS))
        failed = [c for c in COLUMNS if diff[c] and (c in STRUCTURAL or name in strict)]
        if failed:
            bad.append((name, root, failed, examples))
    for name, root, failed, examples in bad:
        for c in failed:
            where = f" (e.g. {examples[c]})" if c in examples else ""
            print(f"VERIFY {name}: {c} differs from the source in {root}{where}", file=sys.stderr)
    return 1 if bad else 0


def cmd_snapshot(args):
    root, path = args
    with open(path, "w") as f:
        json.dump({p: [s.st_ino, s.st_ctime_ns] for p, s in scan(root).items()}, f)
    return 0


def cmd_changed(args):
    root, path = args
    with open(path) as f:
        before = json.load(f)
    now = {p: [s.st_ino, s.st_ctime_ns] for p, s in scan(root).items()}
    replaced = sum(1 for p, v in now.items() if p in before and before[p][0] != v[0])
    touched = sum(
        1 for p, v in now.items() if p in before and before[p][0] == v[0] and before[p][1] != v[1]
    )
    added = len(now.keys() - before.keys())
    removed = len(before.keys() - now.keys())
    print(
        f"{replaced} replaced, {touched} touched, {added} added, {removed} removed "
        f"(of {len(before)} entries)"
    )
    return 0


if __name__ == "__main__":
    cmds = {"compare": cmd_compare, "snapshot": cmd_snapshot, "changed": cmd_changed}
    if len(sys.argv) < 3 or sys.argv[1] not in cmds:
        sys.exit(__doc__)
    sys.exit(cmds[sys.argv[1]](sys.argv[2:]))
