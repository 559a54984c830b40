"""Where the ring's update falls short: what each LGC form applies against the nodes' true mean.

    nice .venv/bin/python -m experiments.results.rar_gap [--iterations 900] [--seed 0] [--no-warmup]
        [--methods lgc_rar,lgc_ps,lgc_scaled,lgc_rar_scaled,dgc] [--set lgc_rar:latent_ratio=0.5]

Eight workers train the plateau grid's model (cnn_fc) on Fashion-MNIST with the plateau grid's
schedule (SGD lr 0.1 cosine over 4,800 iterations, density 1%, DGC's warm-up 234 and coder
training 117 iterations, or no warm-up) with one method in the loop and ideal delivery (no link
layer: the same updates the cell would carry, without its losses). Every method keeps exact error
feedback, so after an exchange the nodes' memories v_j and the applied update a satisfy

    T = mean_j v_j(after) + a      (the nodes' mean memory before the exchange: what fp32 with
                                    error feedback would apply now)

and per iteration the script records, over the whole vector and per layer: the relative error
||a - T|| / ||T||, the share of T that a captures (<a, T> / ||T||^2), and at the positions I where
a is not zero: the share of T's energy there (||T_I||^2 / ||T||^2) and the error there
(||a_I - T_I|| / ||T_I||: the coder's in-use error). Means per window of iterations are printed
and written to docs/results/rar_gap/<name>.json (a new file per run: the name carries the options,
seed and date; an existing file is never overwritten).
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

import torch

from experiments.lgc_probe import seeded_pool
from experiments.results.harness import DOCS_RESULTS
from experiments.results.provenance import code_state
from nodes.compression.ideal import run_exchange
from nodes.compression.registry import build_scheme
from nodes.workers import set_gradients

WORKERS, BATCH, LR, BUDGET, PAYLOAD = 8, 32, 0.1, 4800, 1470
OUT = DOCS_RESULTS / "rar_gap"
METHODS = {   # the plateau grid's rows, as experiments/results/table_fashion.py sets them
    "lgc_rar": {"method": "lgc_rar"}, "lgc_ps": {"method": "lgc_ps"},
    "lgc_scaled": {"method": "lgc_scaled"}, "lgc_rar_scaled": {"method": "lgc_rar_scaled"},
    "dgc": {"method": "dgc"},
}


def layer_slices(shapes) -> list[tuple[str, slice]]:
    out, start = [], 0
    for i, shape in enumerate(shapes):
        n = math.prod(shape)
        out.append((f"p{i}{list(shape)}", slice(start, start + n)))
        start += n
    return out


def measures(a: torch.Tensor, target: torch.Tensor) -> dict[str, float]:
    tt = float(target @ target)
    if tt == 0:
        return {}
    at = a != 0
    t_i = target[at]
    out = {"error": float((a - target).norm()) / math.sqrt(tt), "captured": float(a @ target) / tt,
           "energy_at_I": float(t_i @ t_i) / tt}
    if t_i.numel():
        out["error_at_I"] = float((a[at] - t_i).norm() / t_i.norm()) if float(t_i.norm()) else 0.0
    return out


def run(label: str, options: dict, iterations: int, warmup: int, ae: int, seed: int) -> list[dict]:
    _, model, pool = seeded_pool("fashion_mnist", "cnn_fc", WORKERS, BATCH, seed)
    shapes = [p.shape for p in model.parameters()]
    opts = {"ratio": 0.01, "warmup_iterations": warmup, **{k: v for k, v in options.items() if k != "method"}}
    if options["method"] != "dgc":
        opts["ae_iterations"] = ae
    scheme = build_scheme(options["method"], opts, n_workers=WORKERS, shapes=shapes,
                          payload_bytes=PAYLOAD, seed=seed)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    slices = layer_slices(shapes)
    rows = []
    for it in range(iterations):
        for g in opt.param_groups:   # the plateau grid's cosine schedule over its whole budget
            g["lr"] = 0.5 * LR * (1 + math.cos(math.pi * it / BUDGET))
        grads, _ = pool.gradients()
        a, _ = run_exchange(scheme, it, grads)
        a = a.detach().float().cpu()
        target = torch.stack([scheme.dgc.v[w].float().cpu() if hasattr(scheme, "dgc") else
                              scheme.v[w].float().cpu() for w in range(WORKERS)]).mean(0) + a
        stage = scheme.stage(it) if hasattr(scheme, "stage") and options["method"] != "dgc" else "dgc"
        row = {"iteration": it, "stage": str(stage), **measures(a, target),
               "layers": {name: measures(a[s], target[s]) for name, s in slices}}
        rows.append(row)
        set_gradients(model, a)
        opt.step()
        if (it + 1) % 100 == 0:
            print(f"  {label} it {it + 1}: error {row.get('error', float('nan')):.3f}", flush=True)
    return rows


def windows(rows: list[dict], width: int) -> list[dict]:
    out = []
    for start in range(0, len(rows), width):
        chunk = rows[start:start + width]
        keys = ("error", "captured", "energy_at_I", "error_at_I")
        w = {"from": chunk[0]["iteration"], "to": chunk[-1]["iteration"],
             "stage": "/".join(sorted({r["stage"] for r in chunk}))}
        for k in keys:
            vals = [r[k] for r in chunk if k in r]
            w[k] = statistics.fmean(vals) if vals else None
        names = list(chunk[0]["layers"])
        w["layers"] = {n: {k: statistics.fmean([r["layers"][n][k] for r in chunk if k in r["layers"][n]])
                           for k in keys if any(k in r["layers"][n] for r in chunk)} for n in names}
        out.append(w)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.results.rar_gap", description=__doc__.split("\n")[0])
    ap.add_argument("--methods", default="lgc_rar,lgc_ps,lgc_scaled,lgc_rar_scaled,dgc")
    ap.add_argument("--iterations", type=int, default=900)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-warmup", action="store_true", help="warmup_iterations = 0 (the _nowarmup rows)")
    ap.add_argument("--window", type=int, default=50, help="iterations per printed window")
    ap.add_argument("--set", action="append", default=[], metavar="METHOD:KEY=VALUE",
                    help="an option for one method, e.g. lgc_rar:latent_ratio=0.5 (repeatable)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)   # one thread per process, as the grids run
    warmup, ae = (0 if args.no_warmup else 234), 117
    OUT.mkdir(parents=True, exist_ok=True)
    state = code_state()
    for label in [m.strip() for m in args.methods.split(",") if m.strip()]:
        if label not in METHODS:
            raise SystemExit(f"--methods {label!r}: must be among {', '.join(METHODS)}")
        options = dict(METHODS[label])
        extra = {}
        for s in args.set:
            m, _, kv = s.partition(":")
            if m == label:
                k, _, v = kv.partition("=")
                extra[k] = json.loads(v) if v[:1] in "0123456789-[{tf" or v in ("true", "false") else v
        options.update(extra)
        name = "_".join([label, *(f"{k}{v}" for k, v in extra.items()), "nowarmup" if args.no_warmup else "warmup",
                         f"s{args.seed}", f"it{args.iterations}", time.strftime("%Y%m%d", time.gmtime())])
        path = OUT / f"{name}.json"
        if path.exists():
            print(f"{path} exists: kept (a new run needs another name)")
            continue
        t0 = time.perf_counter()
        rows = run(label, options, args.iterations, warmup, ae, args.seed)
        result = {"label": label, "options": options, "warmup": warmup, "ae": ae, "seed": args.seed,
                  "iterations": args.iterations, "commit": state["commit"], "clean": state["clean"],
                  "finished_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                  "wall_s": time.perf_counter() - t0, "windows": windows(rows, args.window)}
        path.write_text(json.dumps(result, indent=1))
        print(f"{label}: wrote {path}")
        for w in result["windows"]:
            print(f"  {w['from']:>4}-{w['to']:<4} {w['stage']:<14} error {w['error']:.3f} captured "
                  f"{w['captured']:.3f} energy at I {w['energy_at_I']:.3f} error at I "
                  f"{w['error_at_I'] if w['error_at_I'] is not None else float('nan'):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
