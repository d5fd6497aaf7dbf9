#!/usr/bin/env python3
"""Container images applied as a root filesystem: fastwrite against the tools people use for it.

    benches/image.py [-n ROUNDS] [--image debian|local|python] [--delays 0,20] [--tools a,b,...] [--work DIR]
                     [--mount sshfs:MS | slowfs:OP=MS[,OP=MS...]]

The image (built once into WORK/IMAGE/layout by lab/image.py, tag `bench`), gzip layers:
  debian (the default; issue 52's bench image): a Debian minbase made by debootstrap from
    Debian's packages (bookworm, with python3; as root, once, into WORK/debian/rootfs), its
    CPython standard library (/usr/lib/python3.11, byte-compiled) as a layer of its own,
    site-packages of nine large wheels from PyPI (pip install --target, pinned: WHEELS below;
    numpy, pandas, scipy, matplotlib, scikit-learn, sympy, pyarrow, plotly, botocore), and a changes
    layer: folders made opaque, a folder and files whited out, hard links to files of lower
    layers, a file whited out and written again.
  local: five layers of this machine's own trees (/usr/share/doc, /usr/lib/python3,
    /usr/share/locale, /usr/lib/python3.11) and a smaller changes layer; nothing downloaded.
  python: /usr/lib/python3 and /usr/lib/python3.11 of this machine without their symlinks, and
    a changes layer: the image umoci can apply on sshfs (it sets a symlink's owner and times
    through the symlink, which SFTP follows: it fails on one that dangles in the image, and
    would touch this machine's own file on one that does not).
Pushed to a registry on this machine (`crane registry serve`), reached through
lab/delay-proxy.go holding every chunk DELAY ms each way (compiled once, with Go).

Tools, each run into a fresh folder (WORK/out/DELAY-ROUND-TOOL-PID; nothing is deleted during
the bench, and this run's folders are deleted at its end unless --keep), round-robin, each round starting one tool further on:
  fastwrite-layout  fastwrite extract oci:WORK/layout:bench -o OUT        (delay 0 only)
  umoci-layout      umoci unpack --image WORK/layout:bench OUT           (delay 0 only)
  fastwrite         fastwrite extract docker://localhost:PORT/bench:v1 -o OUT
  skopeo+umoci      skopeo copy docker://... oci:DL:bench && umoci unpack --image DL:bench OUT
  crane|tar         crane export localhost:PORT/bench:v1 - | tar -x -C OUT
  ctr               ctr images pull --plain-http --snapshotter native (Debian's containerd 1.6,
                    a daemon of its own rooted at OUT, started before the clock; the tree is its
                    top snapshot; not in the default --tools: `apt-get install containerd`)
With --mount, every tree is written onto a mount made for the bench (fresh folders there; the
downloads of skopeo stay on the local disk): `sshfs:1` is lab/netfs (sshd and sshfs on this
machine through a proxy adding 1 ms each way: the HPC case), `slowfs:flush=1` lab/slowfs (a
FUSE passthrough whose every close waits 1 ms: the Windows case). Trees are counted in the
mount's backing folder. A mount cannot make device nodes: use --image local or python there
(the debian image has eight in /dev); with umoci on sshfs, --image python.

A run counts when it exits 0 and its tree holds the entries umoci's does (umoci's rootfs is the
reference: counted once, its paths compared); crane|tar exits 2 on this image (a hard link to a
lower layer's file comes before its target in crane's flattened stream), and is reported with
its exit status and entry count, but timed all the same, as the issue reports it.

Reported per delay: the median wall time of each tool, its ratio to fastwrite's, its peak RSS
(GNU time; the largest process of a pipeline), and the entries its tree holds.
Env: FASTWRITE (default target/release/fastwrite).
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FASTWRITE = os.environ.get("FASTWRITE", os.path.join(REPO, "target/release/fastwrite"))
TREES = ["/usr/share/doc", "/usr/lib/python3", "/usr/share/locale", "/usr/lib/python3.11"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on {port}")


# Issue 52's bench image: Debian's minbase and its CPython, and these wheels' trees.
SUITE, MIRROR = "bookworm", "http://deb.debian.org/debian"
WHEELS = [
    "numpy==2.3.5",
    "pandas==2.3.3",
    "scipy==1.16.3",
    "matplotlib==3.10.7",
    "scikit-learn==1.7.2",
    "sympy==1.14.0",
    "pyarrow==22.0.0",
    "plotly==5.24.1",
    "botocore==1.43.11",
]
STDLIB = "usr/lib/python3.11"
SITE = "usr/local/lib/python3.11/dist-packages"


def debian_layers(work):
    """The debian image's layers (lab/image.py's spec), its trees made once under WORK/debian."""
    rootfs = os.path.join(work, "rootfs")
    if not os.path.exists(os.path.join(rootfs, "usr/bin/python3")):
        shutil.rmtree(rootfs, ignore_errors=True)
        subprocess.run(
            [
                "timeout",
                "1800",
                "debootstrap",
                "--variant=minbase",
                "--include=python3",
                SUITE,
                rootfs,
                MIRROR,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        # Its bytecode, as an image's Python holds it once it has run.
        subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(rootfs, STDLIB)])
    site = os.path.join(work, "site-packages")
    if not os.path.exists(os.path.join(site, "botocore")):
        shutil.rmtree(site, ignore_errors=True)
        # (Byte-compiled, as pip installs them.)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--only-binary=:all:",
                "--python-version",
                "3.11",
                "--implementation",
                "cp",
                "--platform",
                "manylinux_2_28_x86_64",
                "--platform",
                "manylinux2014_x86_64",
                "--target",
                site,
            ]
            + WHEELS,
            check=True,
        )
    changes = [
        # Slimmed as images are: docs and apt's lists emptied (opaque), manuals gone (a
        # folder whited out), a test package of the standard library gone.
        {"path": "usr/share/doc/.wh..wh..opq", "data": ""},
        {"path": "usr/share/doc/README", "data": "documentation removed"},
        {"path": "var/lib/apt/lists/.wh..wh..opq", "data": ""},
        {"path": "usr/share/.wh.man", "data": ""},
        {"path": f"{STDLIB}/.wh.pydoc_data", "data": ""},
        # Hard links to files of lower layers.
        {"path": "usr/local/bin", "type": "dir"},
        {"path": "usr/local/bin/python", "type": "hardlink", "link": "usr/bin/python3.11"},
        {
            "path": "usr/local/bin/f2py-numpy",
            "type": "hardlink",
            "link": f"{SITE}/numpy/__init__.py",
        },
        # A file whited out and written again in one layer: the new one stays.
        {"path": "etc/.wh.motd", "data": ""},
        {"path": "etc/motd", "data": "written again"},
    ]
    return [
        {"dir": rootfs, "skip": [STDLIB]},
        {"dir": os.path.join(rootfs, STDLIB), "prefix": STDLIB},
        {"dir": site, "prefix": SITE},
        changes,
    ]


def local_layers():
    """The local image's layers, of this machine's trees."""
    changes = [
        {"path": "changes", "type": "dir"},
        {"path": "changes/note", "data": "changes layer"},
        {"path": ".wh.README", "data": ""},
        {"path": "json/.wh..wh..opq", "data": ""},
        {"path": "json/new.py", "data": "print('new')"},
        {"path": ".wh.email", "data": ""},
        {"path": "changes/hardlink-to-lower", "type": "hardlink", "link": "asyncio/__init__.py"},
        {"path": ".wh.copyright", "data": ""},
        {"path": "copyright", "data": "written again"},
    ]
    return [{"dir": d} for d in TREES] + [changes]


def python_layers():
    """The python image's layers: this machine's Python standard library, with no symlinks
    (umoci sets the owner and times of a symlink through it, which SFTP follows: on sshfs it
    fails on one that dangles, and would touch this machine's file on one that does not)."""
    stdlib = "/usr/lib/python3.11"
    skip = [
        os.path.relpath(os.path.join(folder, name), stdlib)
        for folder, dirs, files in os.walk(stdlib)
        for name in dirs + files
        if os.path.islink(os.path.join(folder, name))
    ]
    changes = [
        {"path": "changes", "type": "dir"},
        {"path": "changes/note", "data": "changes layer"},
        {"path": "json/.wh..wh..opq", "data": ""},
        {"path": "json/new.py", "data": "print('new')"},
        {"path": ".wh.email", "data": ""},
        {"path": "changes/hardlink-to-lower", "type": "hardlink", "link": "asyncio/__init__.py"},
        {"path": ".wh.os.py", "data": ""},
        {"path": "os.py", "data": "written again"},
    ]
    return [{"dir": "/usr/lib/python3"}, {"dir": stdlib, "skip": skip}, changes]


def build_image(work, image):
    """The image's layout (built once): WORK/IMAGE/layout, tag bench; and its layer count."""
    work = os.path.join(work, image)
    layout = os.path.join(work, "layout")
    os.makedirs(work, exist_ok=True)
    layers = {
        "debian": debian_layers,
        "local": lambda _: local_layers(),
        "python": lambda _: python_layers(),
    }[image](work)
    if os.path.exists(os.path.join(layout, "index.json")):
        return layout, len(layers)
    spec = {"layers": layers}
    spec_file = os.path.join(work, "spec.json")
    with open(spec_file, "w") as f:
        json.dump(spec, f)
    subprocess.run(
        [sys.executable, os.path.join(REPO, "lab/image.py"), spec_file, layout, "--tag", "bench"],
        check=True,
    )
    return layout, len(layers)


def count(root):
    n = 0
    for _, dirs, files in os.walk(root):
        n += len(dirs) + len(files)
    return n


def timed(cmd, shell=False):
    """Runs cmd under GNU time: (seconds, exit status, peak RSS in KB)."""
    stats = os.path.join(ARGS.work, "time.txt")
    if shell:
        wrapped = ["/usr/bin/time", "-f", "%M", "-o", stats, "bash", "-c", cmd]
    else:
        wrapped = ["/usr/bin/time", "-f", "%M", "-o", stats] + cmd
    start = time.monotonic()
    done = subprocess.run(wrapped, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.monotonic() - start
    try:
        rss = int(open(stats).read().split()[-1])
    except (OSError, ValueError, IndexError):
        rss = 0
    if done.returncode != 0:
        sys.stderr.write(done.stderr.decode(errors="replace")[-400:])
    return took, done.returncode, rss


def main():
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=3)
    parser.add_argument("--image", choices=["debian", "local", "python"], default="debian")
    parser.add_argument("--delays", default="0,20")
    parser.add_argument(
        "--tools", default="fastwrite-layout,umoci-layout,fastwrite,skopeo+umoci,crane|tar"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep this run's trees (deleted at the end by default)"
    )
    parser.add_argument("--mount", default="", help="sshfs:MS or slowfs:OP=MS[,OP=MS...]")
    parser.add_argument(
        "--work",
        default=os.path.join(os.environ.get("TMPDIR", "/var/tmp"), "fastwrite-image-bench"),
    )
    ARGS = parser.parse_args()
    work = ARGS.work
    os.makedirs(os.path.join(work, "out"), exist_ok=True)
    layout, layers = build_image(work, ARGS.image)
    proxy_bin = os.path.join(work, "delay-proxy")
    if not os.path.exists(proxy_bin):
        subprocess.run(
            ["go", "build", "-o", proxy_bin, os.path.join(REPO, "lab/delay-proxy.go")], check=True
        )
    registry_port = free_port()
    registry = subprocess.Popen(
        ["crane", "registry", "serve", "--address", f"127.0.0.1:{registry_port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    procs = [registry]
    mount = None
    outs = os.path.join(work, "out")
    try:
        if ARGS.mount:
            mount = mount_up(work, ARGS.mount)
            outs = mount
            print(f"writing onto {ARGS.mount}: {mount}")
        wait_port(registry_port)
        subprocess.run(
            ["crane", "push", "--insecure", layout, f"localhost:{registry_port}/bench:v1"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        reference = os.path.join(work, "out", f"reference-{ARGS.image}")
        if not os.path.exists(reference):
            subprocess.run(
                ["umoci", "unpack", "--image", f"{layout}:bench", reference],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        expected = count(os.path.join(reference, "rootfs"))
        print(f"image {ARGS.image}: {layers} gzip layers, {expected} entries in umoci's tree")
        tools = ARGS.tools.split(",")
        for delay in [int(d) for d in ARGS.delays.split(",")]:
            port = free_port()
            proxy = subprocess.Popen(
                [proxy_bin, str(port), str(registry_port), str(delay)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            procs.append(proxy)
            wait_port(port)
            ref = f"localhost:{port}/bench:v1"
            here = [t for t in tools if delay == 0 or not t.endswith("-layout")]
            results = {t: [] for t in here}
            for r in range(ARGS.n):
                for k in range(len(here)):
                    tool = here[(r + k) % len(here)]
                    out = os.path.join(
                        outs,
                        f"{delay}-{r}-{tool.replace('|', '-').replace('+', '-')}-{os.getpid()}",
                    )
                    tree = out
                    if tool == "fastwrite-layout":
                        took = timed([FASTWRITE, "extract", "-q", f"oci:{layout}:bench", "-o", out])
                    elif tool == "umoci-layout":
                        took = timed(["umoci", "unpack", "--image", f"{layout}:bench", out])
                        tree = os.path.join(out, "rootfs")
                    elif tool == "fastwrite":
                        took = timed([FASTWRITE, "extract", "-q", f"docker://{ref}", "-o", out])
                    elif tool == "skopeo+umoci":
                        dl = os.path.join(work, "out", os.path.basename(out) + "-dl")
                        took = timed(
                            f"skopeo copy -q --src-tls-verify=false docker://{ref} oci:{dl}:bench && umoci unpack --image {dl}:bench {out}",
                            shell=True,
                        )
                        tree = os.path.join(out, "rootfs")
                    elif tool == "ctr":
                        took, tree = ctr_pull(out, ref)
                    elif tool == "crane|tar":
                        os.makedirs(out)
                        took = timed(
                            f"set -o pipefail; crane export --insecure {ref} - | tar -x -C {out}",
                            shell=True,
                        )
                    else:
                        sys.exit(f"unknown tool {tool}")
                    # (On a mount, counted in its backing folder: the same files, no round trips.)
                    if mount:
                        tree = os.path.join(mount + ".backing", os.path.relpath(tree, mount))
                    entries = count(tree) if os.path.isdir(tree) else 0
                    results[tool].append((took[0], took[1], took[2], entries))
                    subprocess.run(["sync"])
            fw = [t for t, s, _, e in results.get("fastwrite", []) if s == 0 and e == expected]
            base = statistics.median(fw) if fw else None
            print(f"\n== delay {delay} ms (each way), {ARGS.n} rounds; medians")
            print(f"{'tool':18} {'seconds':>8} {'ratio':>7} {'RSS MB':>7} {'entries':>8}  status")
            for tool, runs in results.items():
                good = [t for t, s, _, e in runs if s == 0 and e == expected]
                pool = good or [t for t, *_ in runs]
                median = statistics.median(pool)
                ratio = f"{median / base:.2f}" if base else "-"
                rss = max(r for _, _, r, _ in runs) / 1024
                status = "ok" if good else "exit " + ",".join(str(s) for _, s, _, _ in runs)
                entries = ",".join(sorted({str(e) for *_, e in runs}))
                print(f"{tool:18} {median:8.2f} {ratio:>7} {rss:7.0f} {entries:>8}  {status}")
    finally:
        for p in procs:
            p.terminate()
            p.wait()
        if mount:
            mount_down(mount)
        # This run's trees (25 GB for -n 3 of the debian image), once every run is timed: the
        # next bench's creates are slow for minutes after a large delete (FIELD-NOTES,
        # "Benchmark trap"), so give the machine time before timing again.
        if not ARGS.keep:
            for root in {os.path.join(work, "out"), (mount + ".backing") if mount else outs}:
                for name in os.listdir(root):
                    if name.endswith(
                        (f"-{os.getpid()}", f"-{os.getpid()}-dl", f"-{os.getpid()}-state")
                    ):
                        shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def ctr_pull(out, ref):
    """`ctr images pull` (Debian's containerd) with the native snapshotter, into a containerd of
    its own rooted at OUT (started before the clock, stopped after): (timed, the tree of the
    image's top snapshot)."""
    state = out + "-state"
    os.makedirs(state)
    sock = os.path.join(state, "containerd.sock")
    config = os.path.join(state, "config.toml")
    with open(config, "w") as f:
        f.write(
            f'version = 2\nroot = "{out}"\nstate = "{state}"\n'
            f'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n[grpc]\n  address = "{sock}"\n'
        )
    daemon = subprocess.Popen(
        ["containerd", "--config", config], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.05)
        took = timed(
            [
                "ctr",
                "--address",
                sock,
                "images",
                "pull",
                "--plain-http",
                "--snapshotter",
                "native",
                ref,
            ]
        )
    finally:
        daemon.terminate()
        daemon.wait()
    snapshots = os.path.join(out, "io.containerd.snapshotter.v1.native", "snapshots")
    numbered = (
        [int(n) for n in os.listdir(snapshots) if n.isdigit()] if os.path.isdir(snapshots) else []
    )
    tree = os.path.join(snapshots, str(max(numbered))) if numbered else out
    return took, tree


def mount_up(work, spec):
    """Mounts what --mount names at WORK/mnt-PID (a fresh mount point): its path."""
    kind, _, arg = spec.partition(":")
    mnt = os.path.join(work, f"mnt-{os.getpid()}")
    if kind == "sshfs":
        subprocess.run(
            [os.path.join(REPO, "lab/netfs"), "up", mnt, arg or "1"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    elif kind == "slowfs":
        subprocess.run(
            [os.path.join(REPO, "lab/slowfs"), "up", mnt] + [a for a in arg.split(",") if a],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    else:
        sys.exit(f"--mount: {spec!r} is neither sshfs:MS nor slowfs:OP=MS,...")
    return mnt


def mount_down(mnt):
    kind = "netfs" if os.path.exists(mnt + ".state") else "slowfs"
    subprocess.run(
        [os.path.join(REPO, "lab", kind), "down", mnt], stdout=subprocess.DEVNULL, check=False
    )


if __name__ == "__main__":
    main()
