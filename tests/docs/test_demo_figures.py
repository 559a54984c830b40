"""The report's figures of the quickstart run and of the live LGC-PS view (docs/results.md,
section 8), recomputed from the runs' exports under docs/results/readme (`testbed export RUN
--format json`, gzipped) without the testbed's code: a deliberate edit of any of them fails here."""
from __future__ import annotations

import gzip
import json
import re
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READMES = ROOT / "docs" / "results" / "readme"


def readme() -> str:
    """Section 8 of the report, where the quickstart's and the live view's figures are stated."""
    report = (ROOT / "docs" / "results.md").read_text()
    return " ".join(report.split("## 8. ", 1)[1].split("\n## ", 1)[0].split())


def export(name: str) -> dict:
    with gzip.open(READMES / f"{name}.json.gz", "rt") as f:
        return json.load(f)


def written(text: str, value: float) -> bool:
    """`text` (a number as the README writes it) is `value` rounded to the digits written."""
    text = text.replace(",", "")
    digits = len(text.split(".")[1]) if "." in text else 0
    return abs(float(text) - value) <= 0.5 * 10 ** -digits + 1e-9


def check(found: tuple[str, ...], values: list[float]) -> None:
    bad = [(f, v) for f, v in zip(found, values) if not written(f, v)]
    assert len(found) == len(values) and not bad, bad


def test_the_demo_figures_state_the_demo_runs_export():
    run = export("demo_quickstart")
    its = {r["iteration"]: r for r in run["iterations"]}
    first = next(e for e in run["evals"] if e["test_accuracy"] >= 0.90)
    last = run["iterations"][-1]
    bits = sum(r["bits_up"] + r["bits_down"] for r in run["iterations"])
    m = re.search(r"passed 90% test accuracy at iteration (\d+) \(([\d.]+) s wall, ([\d.]+) s virtual\) and "
                  r"ended at \*\*([\d.]+)% after (\d+) iterations in ([\d.]+) s wall\*\* \(([\d.]+) s virtual, "
                  r"([\d.]+) MB on the wire\)", readme())
    assert m, "the demo paragraph"
    check(m.groups(), [first["iteration"], its[first["iteration"]]["wall_time_s"], first["virtual_time_s"],
                       100 * run["evals"][-1]["test_accuracy"], len(run["iterations"]), last["wall_time_s"],
                       last["virtual_time_s"], bits / 8e6])


def test_the_live_view_figures_state_the_lgc_and_fp32_exports():
    lgc, fp32 = export("lgc_ps_digits"), export("fp32_digits")
    its = lgc["iterations"]
    stage = [r["bits_up"] for r in its if r["stage"] == "lgc"]
    text = readme()
    m = re.search(r"the uplink falls from ([\d,]+) bits in the first DGC warm-up step to ([\d,]+) bits per "
                  r"iteration on average in the LGC stage \((\d+)x\)", text)
    assert m and its[0]["stage"] == "warmup", "the rate sentence"
    check(m.groups(), [its[0]["bits_up"], statistics.fmean(stage), its[0]["bits_up"] / statistics.fmean(stage)])
    links = lgc["links"]
    snr = [x["snr_db"] for x in links if x["snr_db"] is not None]
    m = re.search(r"lost packets \((\d+) of ([\d,]+) transmissions, all resent\), retransmissions and the SNR "
                  r"\(([-\d.]+) to ([-\d.]+) dB\)", text)
    assert m, "the channel sentence"
    lost = sum(x["lost"] for x in links)
    assert lost == sum(x["retransmitted"] for x in links)
    check(m.groups(), [lost, sum(x["packets"] for x in links), min(snr), max(snr)])

    def per_iteration(run):
        return statistics.fmean(r["bits_up"] + r["bits_down"] for r in run["iterations"])

    def to_80(run):
        return next(e["virtual_time_s"] for e in run["evals"] if e["test_accuracy"] >= 0.80)
    m = re.search(r"([\d.]+)x fewer bits per iteration, 80% test accuracy after ([\d.]+) s of virtual time "
                  r"against ([\d.]+) s, but ([\d.]+)% against ([\d.]+)% final accuracy", text)
    assert m, "the comparison sentence"
    check(m.groups(), [per_iteration(fp32) / per_iteration(lgc), to_80(lgc), to_80(fp32),
                       100 * lgc["evals"][-1]["test_accuracy"], 100 * fp32["evals"][-1]["test_accuracy"]])
