"""What a run must leave, and whether it did: the manifest of a tree, a zip or a tar (each
regular file's name and size), the check of an output against one, and, for copies, what the
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
    """{relative path: size} of the regular files under ROOT, and how many entries are neither
    regular files nor folders (symlinks and the rest)."""
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
        return {
            i.filename: i.file_size
            for i in z.infolist()
            if not i.is_dir() and not stat.S_ISLNK(i.external_attr >> 16)
        }


def tar_manifest(path):
    """The regular files a tar makes: its files and hard links (a link is its target's size)."""
    files = {}
    with tarfile.open(path) as t:
        for m in t:
            if m.isfile():
                files[m.name.removeprefix("./")] = m.size
            elif m.islnk():
                files[m.name.removeprefix("./")] = files.get(m.linkname.removeprefix("./"), 0)
    return files


def describe(got, want, other=0):
    """Why the files GOT are not WANT (both {name: size}), or None."""
    missing = sum(1 for k in want if k not in got)
    extra = sum(1 for k in got if k not in want)
    sizes = sum(1 for k in want if k in got and got[k] != want[k])
    if not (missing or extra or sizes or other):
        return None
    return (
        f"{len(got)} files ({sum(got.values())} bytes), expected {len(want)} "
        f"({sum(want.values())} bytes): {missing} missing, {extra} extra, {sizes} of another "
        f"size, {other} not regular files"
    )


def check_tree(want, where=lambda path: path):
    """A runner check: the slot's output folder (or WHERE it is, say a mount's backing folder)
    holds exactly WANT's files, each of its size."""

    def check(slot):
        root = where(slot.out)
        if not os.path.isdir(root):
            return f"no output folder {root}"
        got, other = manifest(root)
        return describe(got, want, other)

    return check


def check_count(files, size=None, where=lambda path: path):
    """A runner check by count (and total size) alone, where names vary (a UFO's, a rootfs')."""

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
        for n in dirs + names:
            p = os.path.join(folder, n)
            out[os.path.relpath(p, root)] = os.lstat(p)
    return out


KINDS = (("file", stat.S_ISREG), ("dir", stat.S_ISDIR), ("symlink", stat.S_ISLNK))


def kind(st):
    return next((k for k, test in KINDS if test(st.st_mode)), "other")


COLUMNS = ["missing", "extra", "type", "size/target", "mode", "owner", "file mtime", "dir mtime"]
COLUMNS += ["top mtime", "link mtime", "hardlinks"]
STRUCTURAL = {"missing", "extra", "type", "size/target"}


def differences(src_root, src, dst_root):
    """{column: entries of DST that differ from SRC in it}."""
    dst = scan(dst_root)
    diff = dict.fromkeys(COLUMNS, 0)
    diff["extra"] = len(dst.keys() - src.keys())
    groups = {}  # a source inode -> the copy's inodes, for files with several links
    for p, s in src.items():
        d = dst.get(p)
        if d is None or kind(d) != kind(s):
            diff["missing" if d is None else "type"] += 1
            continue
        k = kind(s)
        if k == "file" and s.st_size != d.st_size:
            diff["size/target"] += 1
        links = (
            [os.readlink(os.path.join(r, p)) for r in (src_root, dst_root)] if k == "symlink" else 0
        )
        if links and links[0] != links[1]:
            diff["size/target"] += 1
        if k != "symlink" and stat.S_IMODE(s.st_mode) != stat.S_IMODE(d.st_mode):
            diff["mode"] += 1
        if (s.st_uid, s.st_gid) != (d.st_uid, d.st_gid):
            diff["owner"] += 1
        if s.st_mtime_ns != d.st_mtime_ns:
            where = {"dir": "dir mtime", "symlink": "link mtime"}.get(k, "file mtime")
            diff["top mtime" if p == "." else where] += 1
        if k == "file" and s.st_nlink > 1:
            groups.setdefault(s.st_ino, set()).add(d.st_ino)
    diff["hardlinks"] = sum(1 for g in groups.values() if len(g) > 1)
    return diff


def fidelity(src_root, copies, strict):
    """The metadata table of each copy ({name: folder}) against SRC_ROOT, as markdown, and the
    failures: a structural difference for anyone, any difference for a copy named in STRICT (an
    exact copy is its job; the others' differences are shown, not failed)."""
    src = scan(src_root)
    lines = ["| tool | " + " | ".join(COLUMNS) + " |", "| --- |" + " ---: |" * len(COLUMNS)]
    failures = []
    for name, root in copies.items():
        diff = differences(src_root, src, root)
        lines.append(f"| {name} | " + " | ".join(str(diff[c]) for c in COLUMNS) + " |")
        bad = [c for c in COLUMNS if diff[c] and (c in STRUCTURAL or name in strict)]
        failures += [f"{name}: {c} differs from the source in {root}" for c in bad]
    return "\n".join(lines), failures


def snapshot(root):
    return {p: (s.st_ino, s.st_ctime_ns) for p, s in scan(root).items()}


def changed(root, before):
    """(replaced, touched, added, removed) since SNAPSHOT BEFORE of ROOT: other inode; same
    inode, new ctime (data, mode, owner or times set, even to the same values)."""
    now = snapshot(root)
    replaced = sum(1 for p, v in now.items() if p in before and before[p][0] != v[0])
    touched = sum(
        1 for p, v in now.items() if p in before and before[p] != v and before[p][0] == v[0]
    )
    return replaced, touched, len(now.keys() - before.keys()), len(before.keys() - now.keys())
