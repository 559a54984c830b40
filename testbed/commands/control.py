"""`testbed control RUN --link TARGET --bandwidth-mbps X ...`: steer a running run from the shell.

The request is validated here (same rules as the dashboard: testbed.controls), written to the
store, and applied by the running experiment at its next iteration."""
from __future__ import annotations

import time

from testbed.commands import add_store_arg, open_store
from testbed.controls import validate_control


def register(sub) -> None:
    p = sub.add_parser("control", help="change a running run's link bandwidth, delay or loss")
    p.add_argument("run", help="run name (newest of that name) or id")
    add_store_arg(p)
    p.add_argument("--link", default="*", help="'*' (all links, default), 'u-v' (both ways) or 'u->v'")
    p.add_argument("--bandwidth-mbps", type=float, dest="bandwidth_mbps")
    p.add_argument("--delay-ms", type=float, dest="delay_ms")
    p.add_argument("--loss-p", type=float, dest="loss_p", help="Bernoulli loss probability in [0, 1]")
    p.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                   help="wait up to this long for the run to apply the request and report it")
    p.set_defaults(func=main)


def main(args) -> int:
    changes = {k: getattr(args, k) for k in ("bandwidth_mbps", "delay_ms", "loss_p")
               if getattr(args, k) is not None}
    with open_store(args.store) as store:
        run = store.run(args.run)
        target, changes = validate_control(run, args.link, changes)
        cid = store.request_control(run["id"], target, changes)
        print(f"control {cid} requested for run {run['id']} ({run['name']}): {target} {changes}")
        deadline = time.monotonic() + args.wait
        while time.monotonic() < deadline:
            (ctl,) = [c for c in store.controls(run["id"]) if c["id"] == cid]
            if ctl["status"] != "pending":
                print(f"control {cid} {ctl['status']} at iteration {ctl['applied_iteration']}: {ctl['message']}")
                return 0 if ctl["status"] == "applied" else 1
            time.sleep(0.2)
    return 0
