"""The benches' one harness: fixtures that start what a bench runs against (fixtures.py), the
corpora it runs on (corpora.py), one runner that times and checks every run (runner.py), and one
report (report.py). A bench is a short scenario in benches/scenarios/, run by benches/bench.py."""
