"""Every command line of README.md and of the user guide runs as written.

The pages: README.md, docs/getting-started.md and docs/how-to/*.md. Each page's ```sh blocks are
read line by line and each line is run with bash, in the page's order, in a temporary copy of
the repository of the page's own (so `runs.db`, `tb/` and the like land there, and one page's
files never meet another's). A failure names the page and the line (`docs/how-to/ray.md:31`).
What is added to a line, and why:
  - lines that train (`testbed run`, `testbed sweep`, `torchrun`) get `--set run.iterations=2`:
    the command is the page's, the budget tiny;
  - servers (`make demo`, `testbed demo`, `testbed dashboard`, `tensorboard`) get a free port
    (`PORT=N` for make, `--port N` otherwise), are started, and are stopped with Ctrl-C once
    they answer HTTP 200;
  - `make` lines get `-o .venv/.installed`: they use the venv that runs these tests (linked
    into the copy) and never reinstall into it; `make test` runs with
    PYTEST_ADDOPTS=--collect-only (the suite cannot run itself; collecting it checks the target
    and every test module's imports), and `make bench` gets BENCH=channels (the one quick
    benchmark module that takes seconds: all of them take minutes);
  - `testbed control` steers a run: a quickstart run is started in the background first and
    the control must be applied by it.
A command continued with a backslash is joined to its next line, as the shell joins it. A line
fails the test on a non-zero exit status (or a server that never answers). A line that cannot
run here (a second host) belongs in a ```text block, and so does one that installs a package:
such a line in a ```sh block fails the test without being run (the environment the tests run in
is shared and stays as it is).
The pages' ```python blocks are run whole, each by the venv's python in its page's copy, after
every command line; the block sets its own small budget.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from testbed.records.store import Store

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
GUIDES = [ROOT / "docs" / "getting-started.md", *sorted((ROOT / "docs" / "how-to").glob("*.md"))]
PAGES = [README, *GUIDES]
VENV = Path(sys.prefix)
TRAINS = ("testbed run ", "testbed sweep ", "torchrun ")
SERVERS = ("make demo", "testbed demo ", "testbed dashboard", "tensorboard ")
NEEDS_VENV = ("make ", "source .venv/")   # lines that use the repository's own .venv
COMMENT = re.compile(r"\s+#\s.*$")
INSTALLS = re.compile(r"(^|[\s;&|/])(pip3?|uv pip|python3?(\.\d+)? -m pip) (un)?install\b")
FENCE = re.compile(r"^(\s*)```(\S*)")


@dataclass(frozen=True)
class Snippet:
    """A command line (or a whole python block) of a page, and where it is."""
    page: Path
    line: int      # 1-based line of the page (a block: its first line of code)
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path, lang: str) -> list[tuple[int, list[str], str]]:
    """The page's fenced blocks of `lang`: (first code line, code lines, indentation)."""
    out, current = [], None
    for n, text in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        fence = FENCE.match(text)
        if current is None:
            if fence:
                current = (n + 1, [], fence.group(1), fence.group(2))
        elif fence and text.strip() == "```":
            if current[3] == lang:
                out.append(current[:3])
            current = None
        else:
            current[1].append(text)
    return out


def command_lines(page: Path) -> list[Snippet]:
    """The commands of the page's ```sh blocks, a line continued with a backslash joined to the
    next as the shell joins it (the snippet's line is the command's first)."""
    out = []
    for first, code, _ in blocks(page, "sh"):
        start, parts = None, []
        for i, ln in enumerate(code):
            if not parts and (not ln.strip() or ln.lstrip().startswith("#")):
                continue
            start = first + i if not parts else start
            parts.append(ln.strip().removesuffix("\\").strip() if ln.rstrip().endswith("\\") else ln.strip())
            if not ln.rstrip().endswith("\\"):
                out.append(Snippet(page, start, " ".join(parts)))
                parts = []
        if parts:
            out.append(Snippet(page, start, " ".join(parts)))
    return out


def python_blocks(page: Path) -> list[Snippet]:
    return [Snippet(page, first, "\n".join(code) + "\n") for first, code, _ in blocks(page, "python")]


LINES = [s for page in PAGES for s in command_lines(page)]
PYTHON_BLOCKS = [s for page in PAGES for s in python_blocks(page)]
README_LINES = [s.text for s in LINES if s.page == README]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def with_additions(line: str, port: int | None) -> str:
    """The line as run: the page's command, its comment dropped, plus the additions above."""
    cmd = COMMENT.sub("", line)
    if cmd.startswith(TRAINS):
        cmd += " --set run.iterations=2"
    if cmd.startswith("make "):
        cmd = "make -o .venv/.installed " + cmd[len("make "):]
        if "demo" in cmd.split():
            cmd += f" PORT={port}"
        if "bench" in cmd.split():
            cmd += " BENCH=channels"
    elif port is not None:
        cmd = re.sub(r"--port \d+", f"--port {port}", cmd) if "--port " in cmd else cmd + f" --port {port}"
    return cmd


@pytest.fixture(scope="module")
def copy_of(tmp_path_factory):
    """The page's own copy of the repository, made when its first line runs."""
    made: dict[Path, Path] = {}

    def copy(page: Path) -> Path:
        if page not in made:
            dst = tmp_path_factory.mktemp(page.stem) / "repo"
            shutil.copytree(ROOT, dst, ignore=shutil.ignore_patterns(
                ".git", ".venv", "*.db", "*.db-wal", "*.db-shm", "__pycache__", ".pytest_cache",
                "*.egg-info", "tb", "out", "site"))
            if (VENV / ".installed").exists():
                (dst / ".venv").symlink_to(VENV)
            made[page] = dst
        return made[page]
    return copy


def env_for(copy: Path, **extra) -> dict:
    return {**os.environ, "PATH": f"{VENV / 'bin'}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(copy), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **extra}


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def as_in_a_terminal() -> None:
    """In the child, before it runs the line: Ctrl-C does what it does in a terminal, even where
    this test runs in the background (a shell starts background jobs with SIGINT ignored, and a
    program inherits that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt(proc: subprocess.Popen) -> None:
    """Ctrl-C to the line's whole process group; kill what is left after 20 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def run_server(where: str, cmd: str, copy: Path, port: int, log: Path) -> None:
    with log.open("w") as out:
        proc = subprocess.Popen(["bash", "-c", cmd], cwd=copy, env=env_for(copy), stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=as_in_a_terminal)
        try:
            deadline = time.monotonic() + 240
            while not answers(f"http://127.0.0.1:{port}/"):
                assert proc.poll() is None, f"{where}: {cmd!r} exited {proc.returncode}:\n{log.read_text()[-3000:]}"
                assert time.monotonic() < deadline, \
                    f"{where}: {cmd!r} did not answer on port {port}:\n{log.read_text()[-3000:]}"
                time.sleep(0.5)
        finally:
            interrupt(proc)


def run_control(where: str, cmd: str, copy: Path) -> None:
    """Start a quickstart run to steer, run the line, and see the run apply the control."""
    store = copy / "runs.db"
    with (copy / "steered.log").open("w") as out:
        run = subprocess.Popen(["testbed", "run", "experiments/quickstart.toml", "--quiet",
                                "--set", "run.iterations=100000", "--set", "run.flush_every=1"],
                               cwd=copy, env=env_for(copy), stdout=out, stderr=subprocess.STDOUT,
                               start_new_session=True, preexec_fn=as_in_a_terminal)
        try:
            with Store(store) as reader:
                deadline = time.monotonic() + 240
                while not [r for r in reader.runs() if r["name"] == "quickstart"
                           and r["status"] == "running" and r["last_iteration"] is not None]:
                    assert run.poll() is None and time.monotonic() < deadline, \
                        (copy / "steered.log").read_text()[-3000:]
                    time.sleep(0.5)
                rid = max(r["id"] for r in reader.runs())
                proc = subprocess.run(["bash", "-c", cmd], cwd=copy, env=env_for(copy),
                                      capture_output=True, text=True, timeout=120)
                assert proc.returncode == 0, f"{where}: {cmd!r}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
                deadline = time.monotonic() + 120
                while not [c for c in reader.controls(rid) if c["status"] != "pending"]:
                    assert time.monotonic() < deadline, f"{where}: the running run never took the control"
                    time.sleep(0.5)
                (control,) = reader.controls(rid)
                assert control["status"] == "applied", f"{where}: {control['message']}"
        finally:
            interrupt(run)


def test_the_readme_has_its_command_blocks():
    assert README_LINES[0].startswith("make demo")   # the first command a reader meets
    assert any(ln.startswith("testbed run ") for ln in README_LINES)
    assert any(ln.startswith("make test") for ln in README_LINES)


@pytest.mark.parametrize("page", GUIDES, ids=[str(p.relative_to(ROOT)) for p in GUIDES])
def test_a_guide_page_has_command_lines_this_test_can_read(page):
    """Every guide page shows commands, and none that this test would miss or must not run: a
    ```sh fence inside a list (indented, so not read here), or a line that installs a package
    into the environment the tests run in (it belongs in a ```text block)."""
    assert command_lines(page), f"{page.relative_to(ROOT)}: no ```sh block"
    for first, _, indent in blocks(page, "sh"):
        assert not indent, f"{page.relative_to(ROOT)}:{first - 1}: a ```sh fence must start its line"
    for s in command_lines(page):
        assert not INSTALLS.search(s.text), \
            f"{s.where}: {s.text!r} installs a package; show it in a ```text block (this test leaves the environment as it is)"


def test_the_guide_covers_the_first_steps():
    lines = [s.text for s in LINES if s.page == GUIDES[0]]
    for start in ("make demo", "testbed run ", "testbed runs", "testbed sweep ", "testbed dashboard "):
        assert any(ln.startswith(start) for ln in lines), f"getting-started.md has no `{start}` line"


@pytest.mark.parametrize("line", LINES, ids=[f"{s.where} {COMMENT.sub('', s.text)[:50]}" for s in LINES])
def test_command_line_runs(line, copy_of):
    assert not INSTALLS.search(line.text), \
        f"{line.where}: {line.text!r} installs a package: not run here (it belongs in a ```text block)"
    copy = copy_of(line.page)
    if line.text.startswith(NEEDS_VENV) and not (copy / ".venv").exists():
        pytest.skip(f"{line.where}: needs the venv `make venv` built ({VENV}/.installed is missing)")
    port = free_port() if line.text.startswith(SERVERS) else None
    cmd = with_additions(line.text, port)
    if port is not None:
        run_server(line.where, cmd, copy, port, copy / f"server_{port}.log")
    elif cmd.startswith("testbed control "):
        run_control(line.where, cmd, copy)
    else:
        extra = {"PYTEST_ADDOPTS": "--collect-only -q"} if cmd.endswith(" test") else {}
        proc = subprocess.run(["bash", "-c", cmd], cwd=copy, env=env_for(copy, **extra),
                              capture_output=True, text=True, timeout=800)
        assert proc.returncode == 0, \
            f"{line.where}: {cmd!r} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[f"python {s.where}" for s in PYTHON_BLOCKS])
def test_python_block_runs(block, copy_of):
    proc = subprocess.run([sys.executable, "-c", block.text], cwd=copy_of(block.page),
                          env=env_for(copy_of(block.page)), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, \
        f"{block.where}:\n{block.text}\nexited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def test_the_readme_has_a_python_block():
    assert any("from testbed import api" in b.text for b in PYTHON_BLOCKS if b.page == README)
