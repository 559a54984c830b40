"""`testbed demo FILE`: serve the dashboard, print its address, run the experiment live."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from testbed.commands import add_store_arg
from testbed.commands import run as run_cmd
from testbed.distributed.launcher import RunSpec
from testbed.store import Store


def register(sub) -> None:
    p = sub.add_parser("demo", help="run an experiment while the dashboard serves it live")
    p.add_argument("file", nargs="?", default="experiments/quickstart.toml")
    add_store_arg(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8050)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--exit", action="store_true",
                   help="stop the dashboard when the run ends (default: keep serving until Ctrl-C)")
    p.set_defaults(func=main)


def wait_for_port(host: str, port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex((host, port)) == 0:
                return True
        time.sleep(0.2)
    return False


def main(args) -> int:
    url = f"http://{args.host}:{args.port}"
    print(f"dashboard: {url}", flush=True)
    Store(args.store).close()  # the dashboard finds the store's tables from the first second
    server = subprocess.Popen([sys.executable, "-m", "testbed.cli", "dashboard", "--store", args.store,
                               "--host", args.host, "--port", str(args.port)],
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        if not wait_for_port(args.host, args.port, 60):
            print(f"testbed: error: the dashboard did not start on {url}", file=sys.stderr)
            return 1
        code = run_cmd.run(RunSpec(store=args.store, file=args.file, overrides=tuple(args.overrides)))
        if code or args.exit:
            return code
        print(f"run finished; the dashboard keeps serving at {url} (Ctrl-C to stop)", flush=True)
        server.wait()
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
