"""`testbed control RUN --link TARGET --bandwidth-mbps X ...`: steer a running run from the shell.

The request is validated here (same rules as the dashboard: testbed.records.controls), written to the
store, and applied by the running experiment at its next iteration; the command waits (10 s by
default) for the run to say so and prints the iteration it applied it at."""
from __future__ import annotations

import time

from lgc_schema import OptionError
from testbed.commands import add_store_arg, open_store
from testbed.records.controls import validate_control

WAIT_S = 10.0


def register(sub) -> None:
    p = sub.add_parser("control", help="change a running run's link bandwidth, delay or loss")
    p.add_argument("run", help="run name (newest of that name) or id")
    add_store_arg(p)
    p.add_argument("--link", default="*", help="'*' (all links, default), 'u-v' (both ways) or 'u->v'")
    p.add_argument("--bandwidth-mbps", type=float, dest="bandwidth_mbps")
    p.add_argument("--delay-ms", type=float, dest="delay_ms")
    p.add_argument("--loss-p", type=float, dest="loss_p", help="Bernoulli loss probability in [0, 1]")
    p.add_argument("--wait", type=float, default=WAIT_S, metavar="SECONDS",
                   help=f"wait up to this long for the run to apply the request and print at which "
                        f"iteration it did (default {WAIT_S:g}; 0: do not wait)")
    p.set_defaults(func=main)


def main(args) -> int:
    if not args.wait >= 0:
        raise OptionError("--wait", args.wait, "a number of seconds >= 0")
    changes = {k: getattr(args, k) for k in ("bandwidth_mbps", "delay_ms", "loss_p")
               if getattr(args, k) is not None}
    with open_store(args.store) as store:
        run = store.run(args.run)
        target, changes = validate_control(run, args.link, changes)
        cid = store.request_control(run["id"], target, changes)
        print(f"control {cid} requested for run {run['id']} ({run['name']}): {target} {changes}",
              flush=True)
        deadline = time.monotonic() + args.wait
        status = "running"
        while time.monotonic() < deadline and status == "running":
            (ctl,) = [c for c in store.controls(run["id"]) if c["id"] == cid]
            if ctl["status"] != "pending":
                print(f"control {cid} {ctl['status']} at iteration {ctl['applied_iteration']}: {ctl['message']}")
                return 0 if ctl["status"] == "applied" else 1
            time.sleep(0.2)
            status = store.run(run["id"])["status"]
        if args.wait > 0:
            print(f"control {cid} not applied after {args.wait:g} s (run {run['id']} is {status}); "
                  "a running run applies it at its next iteration, and the dashboard's controls "
                  "table shows at which")
    return 0
