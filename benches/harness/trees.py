"""What a run must leave, and whether it did: the manifest of a tree, a zip or a tar (each
regular file's name and size), a run's output checked against one, and for copies what a
manifest does not see: content (diff -r), metadata against the source (types, sizes, symlink
targets, modes, owners, mtimes to the nanosecond, hard links), and whether a run that had
nothing to do changed anything (each entry's inode and ctime).
"""

import os
import stat
import subprocess
import tarfile
import zipfile


def manifest(root):
    """{relative path: size} of the regular files under ROOT, and how many other entries but
    folders (symlinks and the rest) there are."""
    files, other = {}, 0
    for folder, dirs, names in os.walk(root):
        for n in names + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            st = os.lstat(os.path.join(folder, n))
            if stat.S_ISREG(st.st_mode):
                files[os.path.relpath(os.path.join(folder, n), root)] = st.st_size
            else:
                other += 1
    return files, other


def zip_manifest(path):
    """The regular files a zip holds (not its folders, not its symlinks)."""
    with zipfile.ZipFile(path) as z:
        infos = z.infolist()
    return {i.filename: i.file_size for i in infos if not i.is_dir() and not stat.S_ISLNK(i.external_attr >> 16)}


def tar_manifest(path):
    """The regular files a tar makes: its files and hard links (a link its target's size)."""
    files = {}
    with tarfile.open(path) as t:
        for m in (m for m in t if m.isfile() or m.islnk()):
            files[m.name.removeprefix("./")] = m.size if m.isfile() else files.get(m.linkname.removeprefix("./"), 0)
    return files


def describe(got, want, other=0):
    """Why the files GOT are not WANT (both {name: size}), or None."""
    missing, extra = sum(k not in got for k in want), sum(k not in want for k in got)
    sizes = sum(k in got and got[k] != want[k] for k in want)
    if not (missing or extra or sizes or other):
        return None
    counts = f"{missing} missing, {extra} extra, {sizes} of another size, {other} not regular files"
    return f"{len(got)} files ({sum(got.values())} bytes), expected {len(want)}: {counts}"


def check_tree(want, where=lambda path: path):
    """A runner check: the slot's output folder (or WHERE it is: a mount's backing folder) holds
    exactly WANT's files, each of its size."""

    def check(slot):
        got, other = manifest(where(slot.out))
        return describe(got, want, other)

    return check


def check_count(files, size=None, where=lambda path: path):
    """A runner check by count (and total size) alone, where the names are not known."""

    def check(slot):
        got, _ = manifest(where(slot.out))
        if len(got) != files or (size is not None and sum(got.values()) != size):
            return f"{len(got)} files ({sum(got.values())} bytes), expected {files} ({size})"
        return None

    return check


def same_content(a, b):
    """None if trees A and B hold the same names and bytes (symlinks as links), else why."""
    diff = subprocess.run(["diff", "-rq", "--no-dereference", a, b], capture_output=True, text=True)
    return None if diff.returncode == 0 else f"{b} differs from {a}: {diff.stdout[:300]}"


def scan(root):
    out = {".": os.lstat(root)}
    for folder, dirs, names in os.walk(root):
        out |= {os.path.relpath(os.path.join(folder, n), root): os.lstat(os.path.join(folder, n)) for n in dirs + names}
    return out


def kind(st):
    tests = (("file", stat.S_ISREG), ("dir", stat.S_ISDIR), ("symlink", stat.S_ISLNK))
    return next((k for k, test in tests if test(st.st_mode)), "other")


COLUMNS = "missing extra type size/target mode owner file-mtime dir-mtime top-mtime link-mtime"
COLUMNS = COLUMNS.split() + ["hardlinks"]
STRUCTURAL = {"missing", "extra", "type", "size/target"}


def differences(src_root, src, dst_root):
    """{column: how many entries of the copy DST_ROOT differ from SRC in it}."""
    dst, diff, groups = scan(dst_root), dict.fromkeys(COLUMNS, 0), {}
    diff["extra"] = len(dst.keys() - src.keys())
    for p, s in src.items():
        d, k = dst.get(p), kind(s)
        if d is None or kind(d) != k:
            diff["missing" if d is None else "type"] += 1
            continue
        links = k == "symlink" and os.readlink(f"{src_root}/{p}") != os.readlink(f"{dst_root}/{p}")
        diff["size/target"] += links or (k == "file" and s.st_size != d.st_size)
        diff["mode"] += k != "symlink" and stat.S_IMODE(s.st_mode) != stat.S_IMODE(d.st_mode)
        diff["owner"] += (s.st_uid, s.st_gid) != (d.st_uid, d.st_gid)
        if s.st_mtime_ns != d.st_mtime_ns:
            diff["top-mtime" if p == "." else {"dir": "dir-mtime", "symlink": "link-mtime"}.get(k, "file-mtime")] += 1
        if k == "file" and s.st_nlink > 1:  # a source inode -> the copy's inodes
            groups.setdefault(s.st_ino, set()).add(d.st_ino)
    diff["hardlinks"] = sum(len(g) > 1 for g in groups.values())
    return diff


def fidelity(src_root, copies, strict):
    """The metadata table of each copy ({name: folder}) against SRC_ROOT, and the failures: a
    structural difference for anyone, any for a copy in STRICT (an exact copy is its job; the
    others' differences are shown: peers differ in what they keep)."""
    src = scan(src_root)
    lines, failures = (["| tool | " + " | ".join(COLUMNS) + " |", "| --- |" + " ---: |" * len(COLUMNS)], [])
    for name, root in copies.items():
        diff = differences(src_root, src, root)
        lines.append(f"| {name} | " + " | ".join(str(diff[c]) for c in COLUMNS) + " |")
        bad = [c for c in COLUMNS if diff[c] and (c in STRUCTURAL or name in strict)]
        failures += [f"{name}: {c} differs from the source in {root}" for c in bad]
    return "\n".join(lines), failures


def snapshot(root):
    return {p: (s.st_ino, s.st_ctime_ns) for p, s in scan(root).items()}


def changed(root, before):
    """(replaced, touched, added, removed) since the snapshot BEFORE: another inode; the same
    inode with a new ctime (data, mode, owner or times set, even to the same values)."""
    now = snapshot(root)
    both = [(before[p], v) for p, v in now.items() if p in before]
    replaced, touched = (sum(a[0] != b[0] for a, b in both), sum(a[0] == b[0] and a != b for a, b in both))
    return replaced, touched, len(now.keys() - before.keys()), len(before.keys() - now.keys())
