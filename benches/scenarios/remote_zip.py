"""A zip at an http:// URL extracted into a folder: fastwrite reading it where it lives against the ways users have.

    benches/bench.py remote-zip [--corpus botocore|torch|kernel] [--rate B] [--shared-rate B] [--base BIN]
                                [DELAY_MS ...]

lab/range-server.py (ranges; a second one without) behind the delay proxy at 0 5 20 ms. Tools: fastwrite,
curl+fastwrite, curl|bsdtar, ripunzip unzip-uri, fastwrite-stream (no ranges: one stream), curl (the download
alone), fastwrite-base (--base); listing it: fastwrite-list (from the central directory), curl+unzip-l. Requests as
the servers count them. --rate, --shared-rate: range-server.py's. --smoke: botocore at 20 ms.
"""

import contextlib
import os

from harness import corpora, fixtures, report, trees
from harness.runner import q, shell


def arguments(p):
    p.add_argument("--corpus", default="botocore", choices=["botocore", "torch", "kernel"])
    p.add_argument("--rate")
    p.add_argument("--shared-rate")
    p.add_argument("--base", help="another fastwrite binary, timed as fastwrite-base")
    p.add_argument("delays", nargs="*", default=["0", "5", "20"])


def counts(path):
    """A range-server's counts so far ({} before its first answer)."""
    with contextlib.suppress(OSError, ValueError):
        return {k: v for k, v in fixtures.json.loads(path.read_text()).items() if k in ("ranged", "whole")}
    return {}


def listed(entries):
    """A check of a listing tool: its listing.txt has a line per entry (fastwrite's and unzip's
    name folders too; a wheel has none)."""

    def check(slot):
        lines = (slot.out / "listing.txt").read_text().splitlines()
        return None if len(lines) == entries else f"{len(lines)} lines listed, not {entries}"

    return check


def tools(b, fw, url, url2, name):
    q_url = q(url)
    tools = {
        "fastwrite": lambda s: [fw, "extract", "-q", url, "-o", s.out],
        "curl+fastwrite": lambda s: shell(
            f"curl -sS -o {q(s.out)}.zip {q_url} && {q(fw)} extract -q {q(s.out)}.zip -o {q(s.out)}"
        ),
        "curl|bsdtar": lambda s: shell(f"curl -sS {q_url} | bsdtar -xf - -C {q(s.out)}"),
        "ripunzip": lambda s: ["ripunzip", "unzip-uri", "-d", s.out, url],
        "fastwrite-stream": lambda s: [fw, "extract", "-q", url2, "-o", s.out],
        "curl": lambda s: ["curl", "-sS", "-o", f"{s.out}/{name}", url],
        "fastwrite-list": lambda s: shell(f"{q(fw)} list {q_url} > {q(s.out)}/listing.txt"),
        "curl+unzip-l": lambda s: shell(
            f"curl -sS -o {q(s.out)}.zip {q_url} && unzip -Z1 {q(s.out)}.zip > {q(s.out)}/listing.txt"
        ),
    }
    if b.args.base:
        base = fixtures.binary(b.args.base)
        tools["fastwrite-base"] = lambda s: [base, "extract", "-q", url, "-o", s.out]
    return b.wanted({k: v for k, v in tools.items() if k != "ripunzip" or fixtures.have(k)})


def run(b):
    fw, src = b.fastwrite(), corpora.wheel(b.args.corpus)
    site = b.work / "site"
    site.mkdir()
    os.link(src, site / src.name)
    want, name, size = trees.zip_manifest(src), src.name, src.stat().st_size
    limits = [
        f"--{k.replace('_', '-')}={v}" for k, v in (("rate", b.args.rate), ("shared_rate", b.args.shared_rate)) if v
    ]
    server = [fixtures.sys.executable, fixtures.LAB / "range-server.py", site, *limits]
    stats = {k: b.work / f"{k}.json" for k in ("ranged", "whole")}

    def requests():
        return {k: sum(counts(p).get(k, 0) for p in stats.values()) for k in ("ranged", "whole")}

    text = [report.header(f"remote-zip: {name} ({size / 1e6:.1f} MB, {len(want)} files), {b.rounds} rounds")]
    with contextlib.ExitStack() as stack:
        _, ranged = stack.enter_context(fixtures.listening(server + ["--stats", stats["ranged"]], "range-server.py"))
        _, whole = stack.enter_context(
            fixtures.listening(server + ["--no-ranges", "--stats", stats["whole"]], "range-server.py")
        )
        for delay in ["20"] if b.smoke else b.args.delays:
            with fixtures.proxy(ranged, delay) as p1, fixtures.proxy(whole, delay) as p2:
                ways = tools(b, fw, f"{p1.endpoint}/{name}", f"{p2.endpoint}/{name}", name)
                checks = {t: trees.check_tree(want) for t in ways} | {"curl": trees.check_tree({name: size})}
                checks |= {t: listed(len(want)) for t in ("fastwrite-list", "curl+unzip-l")}
                rows = b.batch(f"remote-zip-{delay}ms", ways, checks, meters={"requests": requests}, hot=[src])
            text += ["", f"### {delay} ms each way", "", report.table(rows, meters=["requests"])]
            ratio = report.ratio(rows, "fastwrite", "curl+fastwrite")
            text += [f"\nfastwrite / curl+fastwrite: {ratio:.2f}"] if ratio else []
    b.save("\n".join(text))
