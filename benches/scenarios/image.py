"""Container images applied as a root filesystem: fastwrite against the tools people use for it.

    benches/bench.py image [--image debian|local|python] [--delays 0,20] [--mount sshfs:MS |
                           slowfs:OP=MS[,OP=MS...]]

The image (built once by lab/image.py, gzip layers): `debian` (issue 52's: a Debian minbase by
debootstrap with python3, its standard library as a layer of its own, nine large wheels from PyPI
as site-packages, a changes layer: opaque folders, whiteouts of a folder and files, hard links
to lower layers' files, a file whited out and written again); `local` (this machine's
/usr/share/doc, /usr/lib/python3, /usr/share/locale, /usr/lib/python3.11, and changes); `python`
(this machine's Python without its symlinks: what umoci can apply on sshfs). Pushed to `crane
registry serve` (lab/servers.py), reached through the delay proxy at each delay. Tools:
fastwrite-layout and umoci-layout (from the layout, delay 0 only), fastwrite (from the registry),
skopeo+umoci, crane|tar (crane export | tar -x: exits 2 here, a hard link before its target in
crane's stream; timed all the same), ctr (containerd's pull, native snapshotter, a daemon of its
own; named in --tools only). Every tree must hold the entries of umoci's (the reference). With
--mount, the trees are written onto lab/netfs (sshfs:1) or lab/slowfs (slowfs:flush=1) and
counted in its backing folder. --smoke: the python image at delay 0.
"""

import contextlib
import json
import os
import subprocess
import sys
import time

from harness import fixtures, report
from harness.runner import q, shell

WHEELS = "numpy==2.3.5 pandas==2.3.3 scipy==1.16.3 matplotlib==3.10.7 scikit-learn==1.7.2"
WHEELS = (WHEELS + " sympy==1.14.0 pyarrow==22.0.0 plotly==5.24.1 botocore==1.43.11").split()
STDLIB, SITE = "usr/lib/python3.11", "usr/local/lib/python3.11/dist-packages"
MIRROR = "http://deb.debian.org/debian"
TOOLS = "fastwrite-layout,umoci-layout,fastwrite,skopeo+umoci,crane|tar"


def layer(spec):
    """A layer of entries from words: `PATH/` a folder, `PATH=TEXT` a file (`_` a space in
    TEXT), `PATH->TARGET` a hard link to a lower layer's file (whiteouts are files)."""
    out = []
    for word in spec.split():
        if "->" in word:
            path, link = word.split("->")
            out.append({"path": path, "type": "hardlink", "link": link})
        elif word.endswith("/"):
            out.append({"path": word[:-1], "type": "dir"})
        else:
            path, data = word.split("=", 1)
            out.append({"path": path, "data": data.replace("_", " ")})
    return out


CHANGES = (
    "changes/ changes/note=changes_layer json/.wh..wh..opq= json/new.py=print('new') .wh.email="
)
CHANGES += " changes/hardlink-to-lower->asyncio/__init__.py"
# Slimmed as images are (docs and apt's lists emptied, manuals gone), hard links to lower
# layers' files, a file whited out and written again in one layer (the new one stays).
DEBIAN = "usr/share/doc/.wh..wh..opq= usr/share/doc/README=documentation_removed usr/share/.wh.man="
DEBIAN += f" var/lib/apt/lists/.wh..wh..opq= {STDLIB}/.wh.pydoc_data= usr/local/bin/ etc/.wh.motd="
DEBIAN += (
    f" usr/local/bin/python->usr/bin/python3.11 usr/local/bin/f2py-numpy->{SITE}/numpy/__init__.py"
)
DEBIAN += " etc/motd=written_again"


def layers(image, work):
    """The image's layers (lab/image.py's spec); the debian image's trees made once in WORK."""
    if image == "local":
        trees = ["/usr/share/doc", "/usr/lib/python3", "/usr/share/locale", "/usr/lib/python3.11"]
        return [{"dir": d} for d in trees] + [
            layer(CHANGES + " .wh.README= .wh.copyright= copyright=written_again")
        ]
    if image == "python":  # no symlinks: umoci sets a symlink's times through it, SFTP follows it
        std = f"/{STDLIB}"
        walk = [(d, n) for d, dirs, files in os.walk(std) for n in dirs + files]
        skip = [
            os.path.relpath(os.path.join(d, n), std)
            for d, n in walk
            if os.path.islink(os.path.join(d, n))
        ]
        return [
            {"dir": "/usr/lib/python3"},
            {"dir": std, "skip": skip},
            layer(CHANGES + " .wh.os.py= os.py=written_again"),
        ]
    rootfs, site = work / "rootfs", work / "site-packages"
    if not (rootfs / "usr/bin/python3").exists():
        fixtures.delete(rootfs)
        debootstrap = f"debootstrap --variant=minbase --include=python3 bookworm {rootfs} {MIRROR}"
        fixtures.run(debootstrap.split(), timeout=1800, stdout=subprocess.DEVNULL)
        # Byte-compiled, as an image's Python is once it has run.
        fixtures.run([sys.executable, "-m", "compileall", "-q", rootfs / STDLIB], timeout=1800)
    if not (site / "botocore").exists():
        fixtures.delete(site)
        pip = f"-m pip install -q --no-deps --only-binary=:all: --python-version 3.11 --implementation cp"
        pip += f" --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --target {site}"
        fixtures.run([sys.executable, *pip.split(), *WHEELS], timeout=3600)
    return [{"dir": str(rootfs), "skip": [STDLIB]}, {"dir": str(rootfs / STDLIB), "prefix": STDLIB},
            {"dir": str(site), "prefix": SITE}, layer(DEBIAN)]  # fmt: skip


def count(root):
    return sum(len(dirs) + len(files) for _, dirs, files in os.walk(root))


def ctr_daemon(slot):
    """A containerd of the run's own, rooted at its folder, started before the clock."""
    state = f"{slot.out}-state"
    os.makedirs(state)
    config = (
        f'version = 2\nroot = "{slot.out}"\nstate = "{state}"\n[grpc]\n  address = "{state}/sock"\n'
    )
    with open(f"{state}/config.toml", "w") as f:
        f.write(config + 'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n')
    proc = subprocess.Popen(
        ["containerd", "--config", f"{state}/config.toml"], stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 30
    while not os.path.exists(f"{state}/sock") and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc


def tree_of(root):
    """Where a tool's tree is: umoci's rootfs/, containerd's top snapshot, or the folder."""
    snapshots = root / "io.containerd.snapshotter.v1.native/snapshots"
    if snapshots.exists():
        return max(snapshots.iterdir(), key=lambda p: int(p.name))
    return root / "u/rootfs" if (root / "u").exists() else root


def tools(b, fw, layout, ref, delay):
    dl = f"{b.work}/dl"
    tools = {
        "fastwrite-layout": lambda s: f"{q(fw)} extract -q oci:{layout}:bench -o {q(s.out)}",
        "umoci-layout": lambda s: f"umoci unpack --image {layout}:bench {q(s.out)}/u",
        "fastwrite": lambda s: f"{q(fw)} extract -q docker://{ref} -o {q(s.out)}",
        "skopeo+umoci": lambda s: shell(
            f"skopeo copy -q --src-tls-verify=false docker://{ref} oci:{dl}-{s.id}:bench && umoci unpack --image {dl}-{s.id}:bench {q(s.out)}/u"
        ),
        "crane|tar": lambda s: shell(f"crane export --insecure {ref} - | tar -x -C {q(s.out)}"),
        "ctr": lambda s: (
            f"ctr --address {q(s.out)}-state/sock images pull --plain-http --snapshotter native {ref}"
        ),
    }
    return b.wanted(
        {k: v for k, v in tools.items() if delay == "0" or not k.endswith("-layout")},
        TOOLS.split(","),
    )


def run(b):
    image = "python" if b.smoke else b.args.image
    fw, work = b.fastwrite(), fixtures.CACHE / "image" / image
    layout, reference = work / "layout", work / "umoci-reference"
    if not (layout / "index.json").exists():
        work.mkdir(parents=True, exist_ok=True)
        (work / "spec.json").write_text(json.dumps({"layers": layers(image, work)}))
        build = [
            sys.executable,
            fixtures.LAB / "image.py",
            work / "spec.json",
            layout,
            "--tag",
            "bench",
        ]
        fixtures.run(build, timeout=3600)
    if not reference.exists():
        unpack = ["umoci", "unpack", "--image", f"{layout}:bench", reference]
        fixtures.run(unpack, timeout=3600, stdout=subprocess.DEVNULL)
    expected, daemons = count(reference / "rootfs"), []
    text = [report.header(f"image {image}: {expected} entries in umoci's tree")]

    def before(slot):
        if slot.tool == "ctr":
            daemons.append(ctr_daemon(slot))

    with contextlib.ExitStack() as stack:
        registry = stack.enter_context(fixtures.server("registry", b.work / "registry"))
        push = ["crane", "push", "--insecure", layout, f"localhost:{registry.port}/bench:v1"]
        fixtures.run(push, stdout=subprocess.DEVNULL)
        m = None
        if b.args.mount:
            kind, _, arg = b.args.mount.partition(":")
            kind = {"sshfs": "netfs"}.get(kind, kind)
            m = stack.enter_context(fixtures.mount(kind, b.work / "mnt", *arg.split(",")))

        def check(slot):
            slot.extra["entries"] = n = count(tree_of(m.backing_of(slot.out) if m else slot.out))
            return (
                None
                if n == expected or slot.tool == "crane|tar"
                else f"{n} entries, not {expected}"
            )

        for delay in ["0"] if b.smoke else b.args.delays.split(","):
            with fixtures.proxy(registry.port, delay) as p:
                ways = tools(b, fw, layout, f"localhost:{p.port}/bench:v1", delay)
                crane = {"crane|tar": (0, 2)}  # a hard link before its target: GNU tar exits 2
                rows = b.batch(
                    f"image-{delay}ms",
                    ways,
                    check,
                    out_root=m and m.path,
                    before_run=before,
                    allowed_exits=crane,
                    sync=not m,
                )
            for proc in daemons:
                proc.terminate()
                proc.wait()
            text += ["", f"### {delay} ms each way", "", report.table(rows, meters=["entries"])]
    b.save("\n".join(text))


def arguments(p):
    p.add_argument("--image", default="debian", choices=["debian", "local", "python"])
    p.add_argument("--delays", default="0,20")
    p.add_argument("--mount", default="", help="sshfs:MS or slowfs:OP=MS[,OP=MS...]")
