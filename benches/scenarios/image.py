"""Container images applied as a root filesystem: fastwrite against the tools people use for it.

    benches/bench.py image [--image debian|ml|base|local|python] [--delays 0,20] [--mount sshfs:MS |
                           slowfs:OP=MS[,OP=MS...]] [--fresh-fs 8G]

The image (built once by lab/image.py): debian (a debootstrap minbase, its Python's standard
library, nine wheels from PyPI, a layer of whiteouts, opaque folders and hard links to lower
layers), ml (the same minbase and standard library, and the torch 2.5.1 wheel unzipped into
site-packages as one layer: 1.77 GB of tar, the shape of a machine-learning image), base (the
debian image's first layer alone, its minbase without the standard library nor /dev: issue 62's
image onto sshfs), local (this machine's docs, Python and locales), python (this machine's Python
without symlinks: what umoci can apply on sshfs); pushed to `crane registry serve`, behind the delay
proxy. Tools: fastwrite-layout and umoci-layout (delay 0), fastwrite, skopeo+umoci, crane|tar (it
exits 2 here: a hard link before its target), ctr (in --tools only: containerd, a daemon of its
own). Every tree must hold umoci's entries. --smoke: the python image at 0 ms. --fresh-fs 8G:
each run into a freshly made ext4 (root), as issue 62 asks of every timed image run.
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
MIRROR, TOOLS = "http://deb.debian.org/debian", "fastwrite-layout,umoci-layout,fastwrite,skopeo+umoci,crane|tar"
CHANGES = "changes/ changes/note=changes_layer json/.wh..wh..opq= json/new.py=print('new') .wh.email="
CHANGES += " changes/hardlink-to-lower->asyncio/__init__.py"
# Slimmed as images are (docs and apt's lists emptied, manuals gone), hard links to lower
# layers' files, a file whited out and written again in one layer (the new one stays).
DEBIAN = "usr/share/doc/.wh..wh..opq= usr/share/doc/README=documentation_removed usr/share/.wh.man="
DEBIAN += f" var/lib/apt/lists/.wh..wh..opq= {STDLIB}/.wh.pydoc_data= usr/local/bin/ etc/.wh.motd="
DEBIAN += f" usr/local/bin/python->usr/bin/python3.11 usr/local/bin/f2py-numpy->{SITE}/numpy/__init__.py"
DEBIAN += " etc/motd=written_again"


def arguments(p):
    p.add_argument("--image", default="debian", choices=["debian", "ml", "base", "local", "python"])
    p.add_argument("--delays", default="0,20")
    p.add_argument("--mount", default="", help="sshfs:MS or slowfs:OP=MS[,OP=MS...]")


def layer(spec):
    """Entries from words: `PATH/` a folder, `PATH=TEXT` a file (`_`: a space in TEXT), `PATH->TO`
    a hard link to a lower layer's file; whiteouts are files."""
    out = []
    for word in spec.split():
        if "->" in word:
            out.append(dict(zip(("path", "link"), word.split("->"), strict=True), type="hardlink"))
        elif word.endswith("/"):
            out.append({"path": word[:-1], "type": "dir"})
        else:
            out.append(dict(zip(("path", "data"), word.replace("_", " ").split("=", 1), strict=True)))
    return out


def layers(image, work):
    """The image's layers (lab/image.py's spec); the debian image's trees made once in WORK."""
    if image == "local":
        trees = ["/usr/share/doc", "/usr/lib/python3", "/usr/share/locale", "/usr/lib/python3.11"]
        return [{"dir": d} for d in trees] + [layer(CHANGES + " .wh.README= .wh.copyright= copyright=written_again")]
    if image == "python":  # no symlinks: umoci sets a symlink's times through it, SFTP follows it
        std = f"/{STDLIB}"
        links = [
            os.path.join(d, n) for d, ds, fs in os.walk(std) for n in ds + fs if os.path.islink(os.path.join(d, n))
        ]
        skip = [os.path.relpath(p, std) for p in links]
        return [
            {"dir": "/usr/lib/python3"},
            {"dir": std, "skip": skip},
            layer(CHANGES + " .wh.os.py= os.py=written_again"),
        ]
    # (The base image is the debian image's first layer: the same minbase, made once.)
    rootfs = (work.parent / "debian" if image == "base" else work) / "rootfs"
    site = work / "site-packages"
    if image == "ml":
        site = work / "torch"
    if not (rootfs / "usr/bin/python3").exists():
        fixtures.delete(rootfs)
        debootstrap = f"debootstrap --variant=minbase --include=python3 bookworm {rootfs} {MIRROR}"
        fixtures.run(debootstrap.split(), timeout=1800, stdout=subprocess.DEVNULL)
        # Byte-compiled, as an image's Python is once it has run.
        fixtures.run([sys.executable, "-m", "compileall", "-q", rootfs / STDLIB], timeout=1800)
    if image == "base":  # (no device nodes: an SFTP server makes none)
        return [{"dir": str(rootfs), "skip": [STDLIB, "dev"]}]
    wheels, last = (["torch==2.5.1"], "torch") if image == "ml" else (WHEELS, "botocore")
    if not (site / last).exists():
        fixtures.delete(site)
        pip = "-m pip install -q --no-deps --only-binary=:all: --python-version 3.11 --implementation cp"
        pip += " --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64"
        fixtures.run([sys.executable, *pip.split(), "--target", site, *wheels], timeout=3600)
    trees = [{"dir": str(rootfs), "skip": [STDLIB]}, {"dir": str(rootfs / STDLIB), "prefix": STDLIB}]
    if image == "ml":
        return trees + [{"dir": str(site), "prefix": SITE}]
    return trees + [{"dir": str(site), "prefix": SITE}, layer(DEBIAN)]


def count(root):
    return sum(len(dirs) + len(files) for _, dirs, files in os.walk(root))


def containerd(slot):
    """A containerd of the run's own, rooted at its folder, started before the clock."""
    state = f"{slot.out}-state"
    os.makedirs(state)
    with open(f"{state}/config.toml", "w") as f:
        f.write(f'version = 2\nroot = "{slot.out}"\nstate = "{state}"\n[grpc]\n  address = "{state}/sock"\n')
        f.write('disabled_plugins = ["io.containerd.grpc.v1.cri"]\n')
    proc = subprocess.Popen(["containerd", "--config", f"{state}/config.toml"], stderr=subprocess.DEVNULL)
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
    fw, dl = q(fw), f"{b.work}/dl"
    skopeo = f"skopeo copy -q --src-tls-verify=false docker://{ref} oci:{dl}-{{0}}:bench"
    tools = {
        "fastwrite-layout": lambda s: f"{fw} extract -q oci:{layout}:bench -o {q(s.out)}",
        "umoci-layout": lambda s: f"umoci unpack --image {layout}:bench {q(s.out)}/u",
        "fastwrite": lambda s: f"{fw} extract -q docker://{ref} -o {q(s.out)}",
        "skopeo+umoci": lambda s: shell(
            f"{skopeo} && umoci unpack --image {dl}-{{0}}:bench {{1}}/u".format(s.id, q(s.out))
        ),
        "crane|tar": lambda s: shell(f"crane export --insecure {ref} - | tar -x -C {q(s.out)}"),
        "ctr": lambda s: f"ctr --address {q(s.out)}-state/sock images pull --plain-http --snapshotter native {ref}",
    }
    # (A layout on disk has no delay: its tools run at 0 ms only.)
    wanted = b.wanted(tools, TOOLS.split(","))
    return {k: v for k, v in wanted.items() if delay == "0" or "layout" not in k}


def run(b):
    image = "python" if b.smoke else b.args.image
    fw, work = b.fastwrite(), fixtures.CACHE / "image" / image
    layout, reference = work / "layout", work / "umoci-reference"
    if not (layout / "index.json").exists():
        work.mkdir(parents=True, exist_ok=True)
        (work / "spec.json").write_text(json.dumps({"layers": layers(image, work)}))
        fixtures.run(
            [sys.executable, fixtures.LAB / "image.py", work / "spec.json", layout, "--tag", "bench"], timeout=3600
        )
    if not reference.exists():
        fixtures.run(
            ["umoci", "unpack", "--image", f"{layout}:bench", reference], timeout=3600, stdout=subprocess.DEVNULL
        )
    expected, daemons = count(reference / "rootfs"), []
    text = [report.header(f"image {image}: {expected} entries in umoci's tree")]
    with contextlib.ExitStack() as stack:
        registry = stack.enter_context(fixtures.server("registry", b.work / "registry"))
        push = ["crane", "push", "--insecure", layout, f"localhost:{registry.port}/bench:v1"]
        fixtures.run(push, stdout=subprocess.DEVNULL)
        m, (kind, _, arg) = None, b.args.mount.partition(":")
        if kind:
            m = stack.enter_context(fixtures.mount({"sshfs": "netfs"}.get(kind, kind), b.work / "mnt", *arg.split(",")))

        def check(slot):
            slot.extra["entries"] = n = count(tree_of(m.backing_of(slot.out) if m else slot.out))
            return None if n == expected or slot.tool == "crane|tar" else f"{n} entries, not {expected}"

        def before(slot):
            daemons.extend([containerd(slot)] if slot.tool == "ctr" else [])

        for delay in ["0"] if b.smoke else b.args.delays.split(","):
            with fixtures.proxy(registry.port, delay) as p:
                ways = tools(b, fw, layout, f"localhost:{p.port}/bench:v1", delay)
                crane = {"crane|tar": (0, 2)}  # a hard link before its target: GNU tar exits 2
                how = {"out_root": m and m.path, "before_run": before, "allowed_exits": crane, "sync": not m}
                rows = b.batch(f"image-{delay}ms", ways, check, **how)
            for proc in daemons:
                proc.terminate()
                proc.wait()
            meters = ["entries"] + (["written/data"] if b.args.fresh_fs else [])
            text += ["", f"### {delay} ms each way", "", report.table(rows, meters=meters)]
    b.save("\n".join(text))
