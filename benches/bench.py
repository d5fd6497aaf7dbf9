#!/usr/bin/env python3
"""The benches' one door: `benches/bench.py NAME [OPTIONS]` runs the scenario
benches/scenarios/NAME.py on the harness (benches/harness/); `benches/bench.py --list` lists
them; `benches/bench.py NAME --help` says what NAME measures and how. Every scenario takes
-n ROUNDS, --smoke (one round of the smallest input: does it work, not how fast), --tools,
--fastwrite BINARY, --timeout, --keep. One bench at a time on this machine (a lock); corpora,
outputs and results live in ~/.cache/fastwrite-bench (FASTWRITE_BENCH_CACHE), never here.
"""

import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import fixtures, runner  # noqa: E402

SCENARIOS = Path(__file__).resolve().parent / "scenarios"


def main():
    names = sorted(p.stem.replace("_", "-") for p in SCENARIOS.glob("[a-z]*.py"))
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help", "--list"):
        print(__doc__)
        for name in names:
            module = importlib.import_module("scenarios." + name.replace("-", "_"))
            print(f"  {name:16} {module.__doc__.strip().splitlines()[0]}")
        return
    name = sys.argv[1]
    if name not in names:
        raise SystemExit(f"bench: no scenario {name!r} (benches/bench.py --list)")
    module = importlib.import_module("scenarios." + name.replace("-", "_"))
    args = runner.arguments_for(name, module).parse_args(sys.argv[2:])
    if not getattr(module, "TIMED", True):  # checks that time nothing need no lock, no work dir
        raise SystemExit(module.main(args))
    with fixtures.lock():
        bench = runner.Bench(name, args)
        try:
            module.run(bench)
        except BaseException:
            fixtures.say(f"{name} stopped; its outputs and logs are in {bench.work}")
            raise
        bench.finish()


if __name__ == "__main__":
    main()
