"""docs/development.md's table of the golden comparison's measured spread, recomputed from the
stored output of `tests/testbed/golden/spread.py OUT` (docs/results/golden_spread.json) and
from compare.py's tolerances; a deliberate edit of a figure fails here."""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "testbed" / "golden"))
import compare  # noqa: E402  (the golden test's tolerances)

ROWS = {"`train_loss` (before the parting)": ("reduced", ["train_loss"], compare.TOLERANCE["train_loss"]),
        "`test_loss`": ("reduced", ["test_loss"], compare.TOLERANCE["test_loss"]),
        "`drift_norm`": ("reduced", ["drift_norm"], compare.TOLERANCE["drift_norm"]),
        "`lgc_beta`, `lgc_scalar_error`, `lgc_coder_error`":
            ("reduced", ["lgc_beta", "lgc_scalar_error", "lgc_coder_error"], compare.TOLERANCE["lgc_beta"]),
        "bits up, bits down over the run (after the parting)": ("totals", ["bits_up", "bits_down"], compare.BANDS["bits_up"]),
        "virtual time at the end": ("totals", ["virtual_time_s"], compare.BANDS["virtual_time_s"]),
        "energy of the run": ("totals", ["energy_j"], compare.BANDS["energy_j"]),
        "final accuracy (points of 1)": ("totals", ["test_accuracy"], compare.BANDS["test_accuracy"])}


def written(text: str, value: float) -> bool:
    """`text` ("2.5e-5", "0.0028") is `value` rounded to the digits written."""
    mantissa = text.split("e")[0]
    digits = len(mantissa.split(".")[1]) if "." in mantissa else 0
    scale = 10 ** int(text.split("e")[1]) if "e" in text else 1
    return abs(float(text) - value) <= 0.5 * 10 ** -digits * scale * (1 + 1e-9)


def test_the_spread_table_states_the_stored_spread_and_the_tolerances():
    spread = json.loads((ROOT / "docs" / "results" / "golden_spread.json").read_text())
    assert spread["mismatches"] == []
    md = (ROOT / "docs" / "development.md").read_text()
    table = md[md.index("| column | largest difference measured | allowed |"):].split("\n\n")[0]
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in table.splitlines()[2:]]
    assert [c[0] for c in cells] == list(ROWS)
    bad = []
    for name, measured, allowed in cells:
        kind, keys, tolerance = ROWS[name]
        source = spread["reduced_before_parting" if kind == "reduced" else "totals_after_parting"]
        value = max(source[k][0] for k in keys if k in source)
        if not written(measured.split()[0], value) or float(allowed) != tolerance:
            bad.append((name, measured, value, allowed, tolerance))
    assert not bad, bad
