"""`testbed demo FILE`: serve the dashboard, print its address, run the experiment live."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from lgc_schema import OptionError
from testbed.commands import add_store_arg, check_listen, listen_error
from testbed.commands import run as run_cmd
from testbed.errors import RunFailed
from testbed.records.store import Store
from testbed.runspec import RunSpec


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


def wait_for_port(host: str, port: int, timeout: float, server=None) -> bool:
    """Whether host:port answers within `timeout` (False at once if `server`, the process that
    should answer there, has ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server is not None and server.poll() is not None:
            return False
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex((host, port)) == 0:
                return True
        time.sleep(0.2)
    return False


def main(args) -> int:
    url = f"http://{args.host}:{args.port}"
    if not 0 < args.port < 65536:
        raise OptionError("--port", args.port, "in 1..65535")
    busy = check_listen(args.host, args.port)
    if busy is not None:  # before any training: the dashboard could not serve this run
        raise listen_error(args.host, args.port, busy)
    Store(args.store).close()  # the dashboard finds the store's tables from the first second
    server = subprocess.Popen([sys.executable, "-m", "testbed.cli", "dashboard", "--store", args.store,
                               "--host", args.host, "--port", str(args.port), "--quiet",
                               "--starting", args.file],
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        if not wait_for_port(args.host, args.port, 60, server):
            if server.poll() is not None:  # it said why (one line) and with which code
                return server.returncode or 1
            raise RunFailed(f"the dashboard did not start on {url} within 60 s")
        print(f"dashboard: {url} (store {args.store})", flush=True)
        code = run_cmd.run(RunSpec(store=args.store, file=args.file, overrides=tuple(args.overrides)))
        if code or args.exit:
            return code
        print("run finished; the dashboard keeps serving (Ctrl-C to stop)", flush=True)
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
