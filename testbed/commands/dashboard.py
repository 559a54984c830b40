"""`testbed dashboard --store PATH [--host 127.0.0.1 --port 8050]`: serve the live dashboard."""
from __future__ import annotations

import argparse
import sys

from lgc_schema import OptionError
from testbed.cli import serve_dashboard
from testbed.commands import add_store_arg

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def register(sub) -> None:
    p = sub.add_parser("dashboard", help="serve the dashboard over a store (watch, compare, steer runs)")
    add_store_arg(p)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8050, help="TCP port (default 8050)")
    p.add_argument("--access-log", action="store_true", dest="access_log",
                   help="print a line per HTTP request (default: none)")
    p.add_argument("--quiet", action="store_true", help="do not print the address")
    p.add_argument("--starting", metavar="TEXT", default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=main)


def main(args) -> int:
    if not 0 < args.port < 65536:
        raise OptionError("--port", args.port, "in 1..65535")
    if args.host not in LOOPBACK:
        print(f"testbed: warning: binding {args.host}: anyone who can reach this address can "
              "steer running experiments (the dashboard has no login)", file=sys.stderr)
    def announce() -> None:
        if not args.quiet:
            print(f"dashboard: http://{args.host}:{args.port} (store {args.store})", flush=True)

    serve_dashboard(args.store, args.host, args.port, access_log=args.access_log,
                    announce=announce, starting=args.starting)
    return 0
