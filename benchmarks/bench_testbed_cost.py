"""Table 4: what the testbed itself costs, per iteration of the testbed's real loop.

`python -m benchmarks testbed_cost [--full]`, or with CSV into docs/results/:
`.venv/bin/python -m experiments.results.table4_cost [--quick]`.

What is measured and how: experiments/results/table4_cost.py (the table owns its measurement;
this module only runs it, so benchmarks -> experiments and never the other way).
"""
from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from experiments.results.table4_cost import run  # noqa: E402  (the measurement lives there)


def main(quick: bool = True) -> list[dict]:
    return run(quick)


if __name__ == "__main__":
    main(quick="--full" not in sys.argv[1:])
