"""Every command line of README.md runs as written.

The README's ```sh blocks are read line by line and each line is run with bash, in README
order, in one temporary copy of the repository (so `runs.db`, `tb/` and the like land there).
What is added to a line, and why:
  - lines that train (`testbed run`, `testbed sweep`) get `--set run.iterations=2`: the
    command is the README's, the budget tiny;
  - servers (`make demo`, `testbed dashboard`, `tensorboard`) get a free port (`PORT=N` for
    make, `--port N` otherwise), are started, and are stopped with Ctrl-C once they answer
    HTTP 200;
  - `make` lines get `-o .venv/.installed`: they use the venv that runs these tests (linked
    into the copy) and never reinstall into it; `make test` runs with
    PYTEST_ADDOPTS=--collect-only (the suite cannot run itself; collecting it checks the target
    and every test module's imports), and `make bench` gets BENCH=channels (the one quick
    benchmark module that takes seconds: all of them take minutes);
  - `testbed control` steers a run: a quickstart run is started in the background first and
    the control must be applied by it.
A line fails the test on a non-zero exit status (or a server that never answers).
The README's ```python blocks are run whole, each by the venv's python in the same copy, after
the command lines; the block sets its own small budget.
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
from pathlib import Path

import pytest

from testbed.records.store import Store

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
VENV = Path(sys.prefix)
TRAINS = ("testbed run ", "testbed sweep ")
SERVERS = ("make demo", "testbed dashboard", "tensorboard ")
COMMENT = re.compile(r"\s+#\s.*$")


def readme_lines() -> list[str]:
    lines = []
    for block in re.findall(r"^```sh\n(.*?)^```", README.read_text(encoding="utf-8"), re.S | re.M):
        lines += [ln.strip() for ln in block.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return lines


LINES = readme_lines()
PYTHON_BLOCKS = re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), re.S | re.M)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def with_additions(line: str, port: int | None) -> str:
    """The line as run: the README's command, its comment dropped, plus the additions above."""
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
def copy(tmp_path_factory) -> Path:
    dst = tmp_path_factory.mktemp("readme") / "repo"
    shutil.copytree(ROOT, dst, ignore=shutil.ignore_patterns(
        ".git", ".venv", "*.db", "*.db-wal", "*.db-shm", "__pycache__", ".pytest_cache", "*.egg-info",
        "tb", "out"))
    if (VENV / ".installed").exists():
        (dst / ".venv").symlink_to(VENV)
    return dst


def env_for(copy: Path, **extra) -> dict:
    return {**os.environ, "PATH": f"{VENV / 'bin'}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(copy), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **extra}


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def interrupt(proc: subprocess.Popen) -> None:
    """Ctrl-C to the line's whole process group; kill what is left after 20 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def run_server(cmd: str, copy: Path, port: int, log: Path) -> None:
    with log.open("w") as out:
        proc = subprocess.Popen(["bash", "-c", cmd], cwd=copy, env=env_for(copy), stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 240
            while not answers(f"http://127.0.0.1:{port}/"):
                assert proc.poll() is None, f"{cmd!r} exited {proc.returncode}:\n{log.read_text()[-3000:]}"
                assert time.monotonic() < deadline, f"{cmd!r} did not answer on port {port}:\n{log.read_text()[-3000:]}"
                time.sleep(0.5)
        finally:
            interrupt(proc)


def run_control(cmd: str, copy: Path) -> None:
    """Start a quickstart run to steer, run the line, and see the run apply the control."""
    store = copy / "runs.db"
    with (copy / "steered.log").open("w") as out:
        run = subprocess.Popen(["testbed", "run", "experiments/quickstart.toml", "--quiet",
                                "--set", "run.iterations=100000", "--set", "run.flush_every=1"],
                               cwd=copy, env=env_for(copy), stdout=out, stderr=subprocess.STDOUT,
                               start_new_session=True)
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
                assert proc.returncode == 0, f"{cmd!r}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
                deadline = time.monotonic() + 120
                while not [c for c in reader.controls(rid) if c["status"] != "pending"]:
                    assert time.monotonic() < deadline, "the running run never took the control"
                    time.sleep(0.5)
                (control,) = reader.controls(rid)
                assert control["status"] == "applied", control["message"]
        finally:
            interrupt(run)


def test_the_readme_has_its_command_blocks():
    assert LINES[:3] == [ln for ln in LINES if ln.startswith("make ")]  # the first block
    assert any(ln.startswith("testbed sweep ") for ln in LINES)
    assert any("--format tensorboard" in ln for ln in LINES)
    assert len(LINES) >= 12


@pytest.mark.parametrize("line", LINES, ids=[COMMENT.sub("", ln)[:60] for ln in LINES])
def test_readme_line_runs(line, copy):
    if line.startswith("make ") and not (copy / ".venv").exists():
        pytest.skip(f"make lines need the venv `make venv` built ({VENV}/.installed is missing)")
    port = free_port() if line.startswith(SERVERS) else None
    cmd = with_additions(line, port)
    if port is not None:
        run_server(cmd, copy, port, copy / f"server_{port}.log")
    elif cmd.startswith("testbed control "):
        run_control(cmd, copy)
    else:
        extra = {"PYTEST_ADDOPTS": "--collect-only -q"} if cmd.endswith(" test") else {}
        proc = subprocess.run(["bash", "-c", cmd], cwd=copy, env=env_for(copy, **extra),
                              capture_output=True, text=True, timeout=800)
        assert proc.returncode == 0, f"{cmd!r} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=[f"python-{i}" for i in range(len(PYTHON_BLOCKS))])
def test_readme_python_block_runs(block, copy):
    proc = subprocess.run([sys.executable, "-c", block], cwd=copy, env=env_for(copy),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{block}\nexited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def test_the_readme_has_a_python_block():
    assert any("from testbed import api" in b for b in PYTHON_BLOCKS)
