"""docs/results.md stays a report a reader can act on: every command it names exists and parses
(its module imports, `--help` answers, and the command line as written is accepted by the
module's own argument parser, which is stopped before anything runs), every file and figure it
links exists (the figures are ones `python -m experiments.results.figures` draws), every
in-page anchor has its heading, every table has a source line (command, date, commit, seeds),
it has no issue numbers and no account of how the work was organised, it stays short, and the
LGC plateau tables state what their stored run files hold (recomputed without the report's code).

The commands are read from the document itself: code spans and fenced lines that start with
`python -m MODULE`, `testbed COMMAND` or `make TARGET`. They are checked in one fresh
interpreter (imports paid once), with a time limit, so a module that ignores `--help` and starts
a run fails the test instead of hanging it.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "results.md"
MAX_LINES = 430

pytestmark = pytest.mark.timeout(200)


def text() -> str:
    return DOC.read_text(encoding="utf-8")


def code_snippets(md: str) -> list[str]:
    """Every command-like line: each line of a fenced block, each inline code span (which may
    wrap over a line break), comments after `#` dropped, whitespace collapsed."""
    out = []
    fenced = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
    for block in fenced.findall(md):
        out += [line.split("  #")[0].split(" # ")[0] for line in block.splitlines()]
    for span in re.findall(r"`([^`]+)`", fenced.sub("", md)):
        out.append(span)
    return [" ".join(s.split()) for s in out if s.strip()]


def commands(md: str) -> list[tuple[str, str, list[str]]]:
    """(kind, name, argv) for every `python -m M ...`, `testbed C ...` and `make T` in the text."""
    found = []
    for s in code_snippets(md):
        words = s.split()
        if words[:2] == ["python", "-m"] and len(words) > 2:
            found.append(("module", words[2], words[3:]))
        elif words[0] == "testbed" and len(words) > 1:
            found.append(("module", "testbed.cli", words[1:]))
        elif words[0] == "make" and len(words) > 1:
            found.append(("make", words[1], []))
    return found


def test_the_document_names_commands_of_each_kind():
    found = commands(text())
    modules = {name for kind, name, _ in found if kind == "module"}
    assert "experiments.results.figures" in modules
    assert len(modules) >= 10, modules
    assert any(kind == "make" for kind, _, _ in found)


def test_every_make_target_it_names_exists():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([\w.-]+):", makefile, re.M))
    named = {name for kind, name, _ in commands(text()) if kind == "make"}
    assert named and named <= targets, named - targets


CHECK = textwrap.dedent("""
    import argparse, contextlib, io, json, runpy, sys

    class Parsed(Exception):
        pass

    real = argparse.ArgumentParser.parse_args

    def stop_after_parsing(self, args=None, namespace=None):
        ns, extra = self.parse_known_args(args, namespace)
        if extra:
            self.error("unrecognized arguments: " + " ".join(extra))
        raise Parsed()

    def run(module, argv):
        sys.argv = [module, *argv]
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                runpy.run_module(module, run_name="__main__", alter_sys=True)
        except Parsed:
            return "parsed", out.getvalue()
        except SystemExit as e:
            return e.code, out.getvalue()
        except Exception as e:
            return f"{type(e).__name__}: {e}", out.getvalue()
        return "returned without exiting", out.getvalue()

    results = []
    for module, argv in json.loads(sys.argv[1]):
        print("checking", module, argv, flush=True, file=sys.__stderr__)
        argparse.ArgumentParser.parse_args = real
        help_code, help_out = run(module, ["--help"])
        argparse.ArgumentParser.parse_args = stop_after_parsing
        parse_code, parse_out = run(module, argv)
        results.append({"module": module, "argv": argv, "help": help_code,
                        "usage": "usage:" in help_out, "parse": parse_code,
                        "parse_out": parse_out[-400:]})
    print("RESULTS " + json.dumps(results))
""")


def test_every_command_it_names_imports_answers_help_and_parses_as_written():
    todo = sorted({(name, tuple(argv)) for kind, name, argv in commands(text()) if kind == "module"})
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    try:
        proc = subprocess.run([sys.executable, "-c", CHECK, json.dumps(todo)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=150)
    except subprocess.TimeoutExpired as e:
        last = (e.stderr or b"").decode(errors="replace").strip().splitlines()[-1:]
        pytest.fail(f"a command did not stop at --help or at parsing (started a run?): {last}")
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULTS ")), None)
    assert line, proc.stderr[-2000:]
    results = json.loads(line[len("RESULTS "):])
    assert len(results) == len(todo)
    bad = [r for r in results if r["help"] not in (0, None) or not r["usage"] or r["parse"] != "parsed"]
    assert not bad, json.dumps(bad, indent=1)


def links(md: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", md)


def test_every_file_it_links_exists():
    missing = []
    for target in links(text()):
        path = target.split("#")[0]
        if not path or path.startswith(("http://", "https://")):
            continue
        if not (DOC.parent / path).exists():
            missing.append(target)
    assert not missing, missing


def slug(heading: str) -> str:
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def test_every_anchor_it_links_has_a_heading():
    md = text()
    slugs = {slug(h) for h in re.findall(r"^#+ (.+)$", md, re.M)}
    anchors = [t[1:] for t in links(md) if t.startswith("#")]
    assert anchors
    assert not [a for a in anchors if a not in slugs], [a for a in anchors if a not in slugs]


def test_at_least_four_figures_each_drawn_by_the_figures_command():
    sys.path.insert(0, str(ROOT))
    from experiments.results import figures

    images = re.findall(r"!\[[^\]]*\]\(img/results/([\w-]+)\.png\)", text())
    assert len(set(images)) >= 4, images
    assert set(images) <= set(figures.FIGURES), set(images) - set(figures.FIGURES)
    for name in images:
        png = DOC.parent / "img" / "results" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png


def sections(md: str) -> list[str]:
    return re.split(r"^#{2,3} ", md, flags=re.M)


def test_every_table_has_a_source_line_with_command_date_commit_and_seeds():
    """Each section holds at least as many source paragraphs as tables, and each source names a
    command, a date, a commit (or says it was not recorded) and the seeds."""
    untraced = []
    for sec in sections(text())[1:]:                  # the lead-in's answer table is a summary
        tables = len(re.findall(r"^\|---", sec, re.M))
        sources = re.findall(r"Source:(.*?)(?:\n\n|\Z)", sec, re.S)
        if sec.startswith("How to read") or not (tables or sources):
            continue
        if len(sources) < tables:
            untraced.append((sec.splitlines()[0], f"{tables} tables, {len(sources)} sources"))
        for src in sources:
            if not (re.search(r"`(python\s+-m|testbed|make)\s[^`]+`", src) and re.search(r"20\d\d-\d\d-\d\d", src)
                    and "commit" in src and re.search(r"\bseeds?\b", src)):
                untraced.append((sec.splitlines()[0], " ".join(src.split())[:80]))
    assert not untraced, untraced


def test_no_issue_numbers_and_no_account_of_how_the_work_was_organised():
    md = text()
    assert not re.findall(r"\bissues?\s*#?\d", md, re.I)
    assert not re.findall(r"(?<![(\w])#\d+", md)
    assert not re.findall(r"\b(helpers?|sessions?|the lead|lead's)\b", md, re.I)


def test_no_doc_tells_how_the_work_was_organised():
    """README.md and docs/*.md speak in product terms: no issue or ticket numbers, no cards,
    sessions, helpers or machines lent."""
    bad = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"\b(issues?\s*#?\d|tickets?|cards?|card's|sessions?|helpers?|lent)\b", line, re.I):
                bad.append(f"{path.name}:{n}: {line.strip()[:80]}")
    assert not bad, bad


def test_it_stays_short():
    n = len(text().splitlines())
    assert n <= MAX_LINES, f"docs/results.md has {n} lines (at most {MAX_LINES})"


def test_the_figures_plot_the_numbers_the_report_states():
    """Built without a browser: the points agree with the report's tables (hand-copied here)."""
    sys.path.insert(0, str(ROOT))
    from experiments.results import figures

    def trace(fig, name, col=None):
        return next(t for t in fig.data if t.name == name and (col is None or t.xaxis == col))

    plateau = figures.plateau_accuracy_bits()
    lgc = trace(plateau, "LGC-PS", "x")
    assert lgc.x[0] == pytest.approx(36_317, abs=1) and lgc.y[0] == pytest.approx(91.46, abs=0.005)
    assert lgc.error_y.array[0] == pytest.approx(0.25, abs=0.005)
    gpu = trace(plateau, "LGC-PS (4 seeds)", "x2")
    assert gpu.x[0] == pytest.approx(68_275, abs=1) and gpu.y[0] == pytest.approx(91.05, abs=0.005)

    tta = figures.time_to_accuracy_bandwidth()
    fp32 = trace(tta, "fp32")
    assert list(fp32.x) == [1.0, 5.0, 20.0, 100.0]
    assert [round(y, 2) for y in fp32.y] == [395.99, 79.76, 20.46, 4.65]

    energy = figures.energy_to_target()
    radio, compute = energy.data[0], energy.data[1]
    assert [round(v, 1) for v in radio.y] == [117.4, 14.7, 18.7]
    assert [round(v, 1) for v in compute.y] == [10.2, 20.5, 27.3]

    cell = figures.ns3_cell()
    ns3 = next(t for t in cell.data if t.name == "ns-3.37" and t.xaxis == "x")
    assert list(ns3.x) == [1, 2, 5, 10, 20, 50] and ns3.y[-1] == pytest.approx(21.810)


def test_the_plateau_table_states_what_the_run_files_hold():
    """Section 2's table against the stored runs, recomputed here without the report's code:
    seeds, accuracy mean ± sd, paired difference to fp32 over the seeds both rows have, and the
    whole-run uplink and up+down bits per iteration."""
    import statistics as st
    runs: dict[str, dict[int, dict]] = {}
    for p in sorted((ROOT / "docs" / "results" / "plateau_cell_runs").glob("*_s*.json")):
        method, seed = p.stem.rsplit("_s", 1)
        runs.setdefault(method, {})[int(seed)] = json.loads(p.read_text())
    labels = {"fp32": "fp32", "top-k 1%": "topk", "DGC": "dgc", "ScaleCom": "scalecom",
              "LGC ablation (leader's values)": "lgc_ablation",
              "`lgc_scaled` (leader × fitted scalar)": "lgc_scaled", "**LGC-PS**": "lgc_ps",
              "LGC-PS, paper-faithful coder": "lgc_ps_paper", "**LGC-RAR** (ring)": "lgc_rar",
              "LGC-RAR, non-linear decoder (ring)": "lgc_rar_nl",
              "`lgc_scaled` on the momenta": "lgc_scaled_momentum",
              "DGC all-gathered on the ring": "dgc_ring"}
    section = text().split("## 2. ")[1]

    def table_rows(header: str) -> list[list[str]]:
        """The cells of each body row of the section's table that starts with `header`."""
        table = section[section.index(header):].split("\n\n")[0]
        return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]

    def num(s):
        return float(s.replace(",", ""))

    def per_iteration(by: dict[int, dict], key: str) -> float:
        """Bits per iteration over the whole run, mean over the seeds."""
        return st.mean(st.mean(r[key]) for r in by.values())

    rows = table_rows("| method | seeds |")
    assert {labels[r[0]] for r in rows} == set(runs), "every stored method has its row"

    fp = {s: r["final_accuracy"] for s, r in runs["fp32"].items()}
    for r in rows:
        by = runs[labels[r[0]]]
        acc = [100 * by[s]["final_accuracy"] for s in sorted(by)]
        assert int(r[1]) == len(by), r[0]
        mean, sd = (num(x) for x in r[2].split("±"))
        assert (mean, sd) == (pytest.approx(st.mean(acc), abs=0.006), pytest.approx(st.stdev(acc), abs=0.006)), r[0]
        if r[0] != "fp32":
            d = [100 * (by[s]["final_accuracy"] - fp[s]) for s in sorted(by) if s in fp]
            pm, psd = (num(x) for x in r[3].split("±"))
            assert (pm, psd) == (pytest.approx(st.mean(d), abs=0.006), pytest.approx(st.stdev(d), abs=0.006)), r[0]
        assert num(r[5]) == pytest.approx(per_iteration(by, "bits_up"), abs=0.6), r[0]
        assert num(r[6]) == pytest.approx(per_iteration(by, "bits"), abs=0.6), r[0]

    # the made-of table: each step's whole-run ratio and its paired difference to the step before
    steps = {"the leader-only format": ("lgc_ablation", "dgc"), "the scalar": ("lgc_scaled", "lgc_ablation"),
             "learning": ("lgc_ps", "lgc_scaled")}
    made_of = table_rows("| step from DGC")
    assert len(made_of) == len(steps)
    for cells in made_of:
        method, before = steps[cells[0].split(" (")[0]]
        a, b = runs[method], runs[before]
        ratio = per_iteration(b, "bits_up") / per_iteration(a, "bits_up")
        assert num(cells[2].split("x")[0]) == pytest.approx(ratio, abs=0.006), cells[0]
        common = sorted(set(a) & set(b))
        d = [100 * (a[s]["final_accuracy"] - b[s]["final_accuracy"]) for s in common]
        m = re.match(r"([+-]?[\d.]+) ± ([\d.]+) points \((\d) seeds\)", cells[3])
        assert m and int(m[3]) == len(common), cells[3]
        assert (num(m[1]), num(m[2])) == (pytest.approx(st.mean(d), abs=0.006), pytest.approx(st.stdev(d), abs=0.006)), cells[0]
