"""README.md is the product's first page, not a lab log: short, a picture on its first screen, few
figures before the reader knows what the software is, an Install section, and a map into docs/."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
# a figure: digits standing alone (not part of a name such as fp32, python3.11 or 127.0.0.1's host)
FIGURE = re.compile(r"(?<![\w.\-/])\d[\d,.]*(?![\w])")


def test_the_readme_is_short_and_shows_a_picture_on_its_first_screen():
    assert len(README) <= 150
    assert any(line.startswith("![") for line in README[:40])


def test_few_figures_before_the_reader_knows_what_it_is():
    figures = [f for line in README[:60] for f in FIGURE.findall(line)]
    assert len(figures) <= 10, figures


def test_the_sections_a_newcomer_looks_for():
    headings = [line[3:] for line in README if line.startswith("## ")]
    for wanted in ("What it is", "Install", "Quickstart", "Common tasks", "Results", "Testing",
                   "Documentation", "License and citation"):
        assert wanted in headings, wanted
    assert (ROOT / "docs" / "index.md").exists() and (ROOT / "LICENSE").exists()
    assert (ROOT / "CHANGELOG.md").exists() and (ROOT / "CONTRIBUTING.md").exists()


def test_every_readme_link_resolves():
    text = "\n".join(README)
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target
