"""Fetches (or makes) a corpus into the cache and prints its path: what the scenarios use.

    benches/bench.py fetch botocore|scipy|torch|kernel-zip|linux|npm|kernel-tree|bigfiles|small|big

Wheels from PyPI (pinned), the kernel tree zipped by Info-ZIP, Debian's kernel source as tars
(apt), the npm tarball (npm pack), the copy trees, close-lab's generated corpora. Once each.
"""

from harness import corpora

TIMED = False
MAKERS = {"kernel-zip": lambda: corpora.wheel("kernel"), "linux": corpora.linux, "npm": corpora.npm}
MAKERS |= {k: (lambda k=k: corpora.wheel(k)) for k in corpora.WHEELS}
MAKERS |= {f"{k}-tree" if k == "kernel" else k: (lambda k=k: corpora.tree(k)) for k in ("kernel", "bigfiles")}
MAKERS |= {k: (lambda k=k: corpora.generated(k)) for k in ("small", "big")}


def arguments(p):
    p.add_argument("corpus", choices=list(MAKERS))


def main(args):
    print(MAKERS[args.corpus]())
