"""The product code's comments and strings say why the code is as it is, not when something was
measured: a date (YYYY-MM-DD) in a comment or a string literal of channels/, nodes/, testbed/
or dashboards/ fails here, naming its file and line. A measurement goes to docs/results.md
with the command that made it, where tests/docs recomputes it from its stored source; in code
it ages unseen. Read with `tokenize`, so a date in code proper (`date(2026, 12, 4)`) is not
one, and every string literal counts (docstrings, help texts, messages): a date that is data
goes in DATA_DATES with its reason."""
from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("channels", "nodes", "testbed", "dashboards")
DATE = re.compile(r"\b(?:19|20)\d\d-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])\b")

# Files whose dated comments are still to be rewritten (path: what is left). An entry goes
# when its file is clean; test_each_file_left_to_clean_still_has_a_date fails until it does.
NOT_YET_CLEAN: dict[str, str] = {}
# Dates that are data, not a measurement: (path, date): why it stays. None so far.
DATA_DATES: dict[tuple[str, str], str] = {}


def dates_in(source: str) -> list[tuple[int, str, str]]:
    """(line, date, "comment" | "string") for each date in a comment or string literal."""
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in (tokenize.COMMENT, tokenize.STRING):
            continue
        kind = "comment" if tok.type == tokenize.COMMENT else "string"
        for m in DATE.finditer(tok.string):
            found.append((tok.start[0] + tok.string.count("\n", 0, m.start()), m.group(), kind))
    return found


def product_files() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for pkg in PACKAGES
                  for p in (ROOT / pkg).rglob("*.py"))


def dates_of(path: str) -> list[tuple[int, str, str]]:
    return dates_in((ROOT / path).read_text(encoding="utf-8"))


def test_no_date_in_a_comment_or_string_of_the_product_code():
    found = [f"{path}:{line}: {date} in a {kind}"
             for path in product_files() if path not in NOT_YET_CLEAN
             for line, date, kind in dates_of(path) if (path, date) not in DATA_DATES]
    assert not found, ("dated figures in code (say why the code is as it is; the measurement "
                       "goes to docs/results.md):\n" + "\n".join(found))


def test_each_file_left_to_clean_still_has_a_date():
    stale = [path for path in NOT_YET_CLEAN if not dates_of(path)]
    assert not stale, f"clean now, remove from NOT_YET_CLEAN: {', '.join(stale)}"
    stale = [f"{path} {date}" for path, date in DATA_DATES
             if date not in {d for _, d, _ in dates_of(path)}]
    assert not stale, f"no longer there, remove from DATA_DATES: {', '.join(stale)}"


def test_the_scan_reads_comments_and_strings_and_names_the_line():
    source = ('"""Module.\n\nMeasured 2026-12-04 on a busy machine."""\n'
              "x = 1  # (2026-12-06: 1.2 s)\n"
              "y = date(2026, 12, 4) - 2026 - 12 - 4\n"
              "fmt = '%Y-%m-%d'\n"
              "z = f'{x} at 2026-13-01'\n"
              "def f():\n"
              "    '''Why.\n\n    Since 2025-01-31.'''\n")
    assert dates_in(source) == [(3, "2026-12-04", "string"), (4, "2026-12-06", "comment"),
                                (11, "2025-01-31", "string")]
