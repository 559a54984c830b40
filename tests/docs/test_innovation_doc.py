"""docs/lgc_innovation_sweep.md's table recomputed from its run lines
(docs/results/lgc_innovation_runs.jsonl, `python -m experiments.results.innovation_sweep`) without
the report's code; a deliberate edit of any cell fails here."""
from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "lgc_innovation_sweep.md"
RUNS = ROOT / "docs" / "results" / "lgc_innovation_runs.jsonl"
STAGE_START = 90   # the doc's coding stage: iterations 90-239


def rounds_to(written: str, value: float) -> bool:
    written = written.replace(",", "").rstrip("x")
    digits = len(written.split(".")[1]) if "." in written else 0
    return abs(float(written) - value) <= 0.5 * 10 ** -digits + 1e-9


def test_the_innovation_table_states_its_run_lines():
    runs: dict[str, dict[int, dict]] = {}
    for line in RUNS.read_text().splitlines():
        r = json.loads(line)
        assert r["status"] == "completed", r["spec"]["label"]
        runs.setdefault(r["spec"]["tags"]["row"], {})[r["spec"]["tags"]["seed"]] = r
    md = DOC.read_text()
    table = md[md.index("| method | accuracy (seeds 0 / 1 / 2) |"):].split("\n\n")[0].splitlines()[2:]
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in table]
    assert [c[0] for c in cells] == list(runs)

    def acc(r):
        return 100 * r["evals"][-1]["test_accuracy"]
    mean = {row: statistics.fmean(acc(r) for r in by.values()) for row, by in runs.items()}
    stage = {row: statistics.fmean(statistics.fmean(r["bits_up"][STAGE_START:]) for r in by.values()) / 1e3
             for row, by in runs.items()}
    whole = {row: statistics.fmean(statistics.fmean(r["bits_up"]) for r in by.values()) / 1e3
             for row, by in runs.items()}
    bad = []
    for c in cells:
        row = c[0]
        seeds = [acc(runs[row][s]) for s in sorted(runs[row])]
        expect = list(zip(c[1].split(" / "), seeds)) + [(c[2], mean[row]), (c[4], stage[row]), (c[5], whole[row])]
        if row != "fp32":
            expect.append((c[3], mean[row] - mean["fp32"]))
            a, b = c[6].split(" / ")
            expect += [(a, stage["DGC"] / stage[row]), (b, whole["DGC"] / whole[row])]
        bad += [(row, w, v) for w, v in expect if not rounds_to(w, v)]
    assert not bad, bad
    words = " ".join(md.split())
    m = re.search(r"Measured (\d{4}-\d\d-\d\d) .* commit ([0-9a-f]{7})", words)
    assert m and all(r["provenance"]["commit"].startswith(m[2]) for by in runs.values() for r in by.values())
