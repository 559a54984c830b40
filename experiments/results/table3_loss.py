"""Table 3: accuracy and virtual time under packet loss with best-effort delivery.

    .venv/bin/python -m experiments.results.table3_loss [--quick] [--jobs 2]

top-k, DGC and LGC-PS on digits, 8 workers, one shared 20 Mbit/s star cell, best-effort
delivery (a lost packet is gone: no retransmission), at 0, 1, 5 and 20% loss, independent
(Bernoulli) or bursty (Gilbert-Elliott: a lossless good state and a bad state that loses every
packet, mean burst `1 / p_bad_to_good` = 5 packets, stationary loss = the given rate). Each
decoder aggregates what arrived (see nodes/compression/templates.py, "Aggregation under loss").
The measured loss columns are lost / sent packets on the uplinks and on every link (downlink too).
"""
from __future__ import annotations

import argparse
import sys

from experiments.results import methods as M
from experiments.results.harness import TableRun, mean_spread, run_many, stage_lengths
from experiments.results.tables import Column, common_args, emit, out_dir, pick, seeds_of

STAR = "experiments/results_star.toml"
RATES, QUICK_RATES = [0.0, 0.01, 0.05, 0.20], [0.0, 0.05]
BURST_EXIT = 0.2            # p_bad_to_good: mean burst of 5 packets
FULL_ITERATIONS, QUICK_ITERATIONS = 240, 40
DEFAULT_METHODS = ["topk", "dgc", "lgc_ps"]

COLUMNS = [
    Column("method", "method"), Column("loss_model", "loss"), Column("rate", "rate", "{:.0%}"),
    Column("measured_up_loss", "uplink lost", "{:.2%}"), Column("measured_loss", "all links lost", "{:.2%}"),
    Column("status", "status"),
    Column("acc_mean", "acc", "{:.4f}"), Column("acc_std", "acc sd", "{:.4f}"),
    Column("virtual_s", "virtual s", "{:.2f}"), Column("virtual_s_per_it", "virtual s/it", "{:.4f}"),
]


def loss_table(model: str, rate: float) -> str:
    """The `network.link.loss` inline table for a model and a stationary loss rate."""
    if rate == 0:
        return '{model="none"}'
    if model == "bernoulli":
        return f'{{model="bernoulli", p={rate}}}'
    enter = rate * BURST_EXIT / (1 - rate)   # stationary P(bad) = enter / (enter + exit) = rate
    return (f'{{model="gilbert_elliott", p_good_to_bad={enter:.6g}, p_bad_to_good={BURST_EXIT}, '
            f'loss_good=0.0, loss_bad=1.0}}')


def conditions(rates) -> list[tuple[str, float]]:
    out = [("none", 0.0)] if 0.0 in rates else []
    for model in ("bernoulli", "bursty"):
        out += [(model, r) for r in rates if r > 0]
    return out


def specs(labels, seeds, iterations, rates) -> list[TableRun]:
    warmup, ae = stage_lengths(iterations)
    out = []
    for label in labels:
        for model, rate in conditions(rates):
            for seed in seeds:
                out.append(TableRun(f"t3[{label},{model},{rate:g},s{seed}]", STAR,
                                   [f"run.iterations={iterations}", f"run.seed={seed}",
                                    f"run.eval_every={max(1, iterations // 6)}",
                                    'network.link.delivery="best_effort"',
                                    f"network.link.loss={loss_table(model, rate)}",
                                    *M.overrides(label, warmup, ae)],
                                   tags={"method": label, "loss_model": model, "rate": rate,
                                         "seed": seed}))
    return out


def rows_of(results, labels, rates) -> list[dict]:
    rows = []
    for label in labels:
        for model, rate in conditions(rates):
            runs = [r for r in results if r.spec.tags["method"] == label
                    and r.spec.tags["loss_model"] == model and r.spec.tags["rate"] == rate]
            done = [r for r in runs if r.status == "completed"]
            row = {"method": label, "loss_model": model, "rate": rate,
                   "seeds": " ".join(str(r.spec.tags["seed"]) for r in done)}
            if not done:
                row["status"] = runs[0].status if runs else "not run"
                row["note"] = runs[0].note.splitlines()[0] if runs and runs[0].note else ""
                rows.append(row)
                continue
            row["status"] = "ok" if len(done) == len(runs) else f"{len(done)}/{len(runs)} ok"
            row["acc_mean"], row["acc_std"] = mean_spread([r.final_accuracy for r in done])
            row["acc_per_seed"] = " ".join(f"{r.final_accuracy:.4f}" for r in done)
            lost, sent = sum(r.lost for r in done), sum(r.packets for r in done)
            row["measured_loss"] = lost / sent if sent else None
            lost, sent = sum(r.lost_up for r in done), sum(r.packets_up for r in done)
            row["measured_up_loss"] = lost / sent if sent else None
            row["virtual_s"] = mean_spread([r.virtual_time_s for r in done])[0]
            row["virtual_s_per_it"] = mean_spread([r.mean_virtual_s(0) for r in done])[0]
            row["note"] = ""
            rows.append(row)
    return rows


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(prog="python -m experiments.results.table3_loss",
                                 description=__doc__.split("\n")[0])
    common_args(ap, methods=M.LABELS)
    ap.add_argument("--rates", default=None, help="comma-separated loss rates (default 0,0.01,0.05,0.2)")
    args = ap.parse_args(argv)
    iterations = args.iterations or (QUICK_ITERATIONS if args.quick else FULL_ITERATIONS)
    seeds = seeds_of(args.seeds, [0])
    labels = pick(args.methods, M.LABELS, "methods") if args.methods else DEFAULT_METHODS
    rates = ([float(r) for r in args.rates.split(",")] if args.rates
             else QUICK_RATES if args.quick else RATES)
    results = run_many(specs(labels, seeds, iterations, rates), jobs=args.jobs, store=args.store, ray=args.ray, sweep="table3")
    rows = rows_of(results, labels, rates)
    warmup, ae = stage_lengths(iterations)
    notes = [f"digits, cnn, 8 workers, {iterations} iterations, seeds {','.join(map(str, seeds))}, "
             "one shared 20 Mbit/s cell, best-effort delivery; DGC/LGC warm-up "
             f"{warmup}, LGC autoencoder training {ae}; acc = test accuracy at the end of the budget.",
             f"bursty = Gilbert-Elliott (good state lossless, bad state loses all, p_bad_to_good = "
             f"{BURST_EXIT}, p_good_to_bad set for the given stationary rate).",
             "uplink lost / all links lost = lost / sent packets on the workers' uplinks / on every "
             "link of the run. The server's downlink broadcast is delivered reliably (the Downlink "
             "contract: it is sent again to whoever missed it), so loss lengthens the downlink: "
             "that is why virtual time grows with the loss rate."]
    for row in rows:
        if row["status"] != "ok" and row.get("note"):
            notes.append(f"{row['method']} {row['loss_model']} {row['rate']:g}: {row['status']}: {row['note']}")
    emit(rows, COLUMNS, title=f"Table 3: loss under best-effort delivery, {iterations} iterations",
         notes=notes, out=out_dir(args), stem="table3_loss")
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
