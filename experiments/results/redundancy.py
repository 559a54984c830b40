"""Where nodes share information: beta, top-k overlap and a coder's in-use error.

    OMP_NUM_THREADS=1 nice .venv/bin/python -m experiments.results.redundancy   # every point
    .venv/bin/python -m experiments.results.redundancy --points base,n32        # some of them
    .venv/bin/python -m experiments.results.redundancy --report                 # table + plot
    .venv/bin/python -m experiments.results.redundancy --quick                  # seconds

Each point is one real training run (Fashion-MNIST from nodes.data, real workers, plain SGD on
the exchanged aggregate) driven by DGC (`driver = "dgc"`, as shipped: momentum correction,
masking, clipping, sparsity warm-up over the first tenth) or by lgc_ablation (LGC-PS's protocol
with the leader's f16 values: the memories of LGC's own stage). After the warm-up, at every
iteration, every node's DGC-corrected v (its error memory after accumulating this iteration's
gradient, exactly what the scheme selects from: captured at the memory's `compensate`) is read,
and with each node in turn as the would-be leader L (LGC's leader cycles), at L's top-k
positions I (exact top-k of |v_L|, k = density * n):
- beta: the least-squares scalar with mean_j v_j[I] ~ beta * v_L[I] (the mean over all N nodes,
  the leader included, which is what the aggregate credits), pooled over leaders and the
  iterations of a stage after dividing both by the RMS of v_L[I] (LGC's normalisation). With
  nothing shared, the others' memories there are uncorrelated with v_L and beta = 1/N (the
  leader's own share); beta_others = (N beta - 1) / (N - 1) is the others' part alone (0: none).
  fit_err = ||beta x - t|| / ||t|| pooled the same way;
- overlap: the mean over node pairs of |S_i & S_j| / k (the share of one node's top-k set in
  another's) and of the Jaccard index, against the chance values for two random k-sets of n;
- the in-use coder error: lgc_autoencoder's AE (LGC's default shape) trained on the pairs
  (x = v_L[I] / s -> t = mean_j v_j[I] / s, in LGC's "sign" order) of a stage's first two
  thirds of iterations, evaluated on its last third (held out), against the scalar beta fitted
  on the same training pairs, and against 1/N.
- beta_cyclic: beta with only the leader LGC's cyclic default uses (it % N), one pair per
  iteration (the pooled beta takes every node as a would-be leader);
- the same beta and overlap on the iteration's raw gradients (before clipping, momentum and
  error feedback): whether the nodes share anything before the memory mixes iterations.
Stages: the iterations after the warm-up cut into thirds (early, mid, late).

Each finished point is written at once to docs/results/redundancy/<point>.json; a rerun skips
it. `--report` builds the tables (summary.md: one row per point; table.md: every stage) and
the plot (redundancy.svg, written here: no matplotlib in the venv) from whatever is on disk.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from experiments.results.harness import DOCS_RESULTS
from nodes.compression.ideal import run_exchange
from nodes.compression.lgc_autoencoder import GradientAutoencoder
from nodes.compression.lgc_trainer import AETrainer
from nodes.compression.registry import build_scheme
from nodes.data import load_dataset
from nodes.models import SmallCNN, build_model
from nodes.partition import split
from nodes.workers import WorkerPool, set_gradients

OUT = DOCS_RESULTS / "redundancy"
STAGES = ("early", "mid", "late")
LR = 0.1            # fashion_star's peak learning rate, held constant (a schedule would confound stage)
AE_STEPS = 500      # lgc_ps's default AE training: 20 iterations x 25 Adam steps
AE_SHAPE = dict(channels=[16, 16, 16], kernel=5, latent_ratio=0.125)   # lgc's defaults


# ------------------------------------------------------------------ measurement functions
def scalar_fit(x: torch.Tensor, t: torch.Tensor) -> tuple[float, float]:
    """Least-squares beta with t ~ beta * x over every row of (B, k) (or (k,)) batches, and the
    relative error ||beta x - t|| / ||t|| of that fit, pooled over the rows."""
    sxx, sxt, stt = float((x * x).sum()), float((x * t).sum()), float((t * t).sum())
    return fit_from_sums(sxx, sxt, stt)


def fit_from_sums(sxx: float, sxt: float, stt: float) -> tuple[float, float]:
    beta = sxt / sxx if sxx > 0 else 0.0
    resid = max(0.0, stt - 2 * beta * sxt + beta * beta * sxx)
    return beta, math.sqrt(resid / stt) if stt > 0 else float("nan")


def pooled_error(pred: torch.Tensor, t: torch.Tensor) -> float:
    return float((pred - t).norm() / t.norm())


def topk_sets(V: torch.Tensor, k: int) -> torch.Tensor:
    """(N, k) indices of each row's k largest |v|."""
    return torch.topk(V.abs(), k, dim=1, sorted=False).indices


def overlap(sets: torch.Tensor, n: int) -> tuple[float, float]:
    """Mean over node pairs i != j of |S_i & S_j| / k and of the Jaccard index |&| / |u|."""
    N, k = sets.shape
    M = torch.zeros(N, n)
    M.scatter_(1, sets, 1.0)
    C = M @ M.T
    off = ~torch.eye(N, dtype=torch.bool)
    inter = C[off]
    return float((inter / k).mean()), float((inter / (2 * k - inter)).mean())


def leader_pairs(V: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each node of V (N, n) as the leader: its top-k set (N, k), its values there x and the
    mean over all N nodes there t, both divided by the RMS of x (LGC's normalisation)."""
    sets = topk_sets(V, k)
    X = torch.gather(V, 1, sets)
    T = torch.stack([V[:, s].mean(0) for s in sets])
    scale = X.pow(2).mean(1, keepdim=True).sqrt().clamp_min(1e-30)
    return sets, X / scale, T / scale


def chance_overlap(k: int, n: int) -> tuple[float, float]:
    """The same two figures for independent uniformly random k-sets of n coordinates: the
    expected share k/n, and the Jaccard index at the expected intersection k^2/n."""
    inter = k * k / n
    return k / n, inter / (2 * k - inter)


def sign_order(x: torch.Tensor) -> torch.Tensor:
    """LGC's default AE layout (lgc_common.order_of "sign"): positives, then negatives."""
    return torch.cat([torch.nonzero(x >= 0).reshape(-1), torch.nonzero(x < 0).reshape(-1)])


# ------------------------------------------------------------------ the points
@dataclass(frozen=True)
class Point:
    name: str
    model: str = "cnn_fc"       # cnn_fc | cnn_fc_w32 (its 32/64-channel variant) | resnet20
    workers: int = 8
    batch: int = 32
    density: float = 0.01
    partition: str = "iid"      # iid | dirichlet (alpha 0.5)
    driver: str = "dgc"         # dgc | lgc_ablation
    iterations: int = 300
    seed: int = 0
    max_train: int = 0          # 0: all 60k images
    ae_steps: int = AE_STEPS


BASE = Point("base")
# one factor at a time around the base (sized on 2026-12-04: gradients of the base 0.07 s/it of
# one core here, B=512 2.8, N=32 0.46, ResNet-20 0.7; the base point ~50 s of CPU in all)
POINTS = [
    BASE, replace(BASE, name="base_s1", seed=1), replace(BASE, name="base_s2", seed=2),
    replace(BASE, name="b128", batch=128), replace(BASE, name="b512", batch=512, iterations=100),   # 2.8 s/it here
    replace(BASE, name="n4", workers=4), replace(BASE, name="n16", workers=16),
    replace(BASE, name="n32", workers=32),
    replace(BASE, name="d0.1pct", density=0.001),
    replace(BASE, name="dirichlet", partition="dirichlet"),
    replace(BASE, name="w32", model="cnn_fc_w32"),
    replace(BASE, name="resnet20", model="resnet20", iterations=150),
    replace(BASE, name="lgc_stage", driver="lgc_ablation"),
    replace(BASE, name="long", iterations=1200),
]
QUICK = Point("quick", workers=4, batch=8, iterations=24, max_train=512, ae_steps=10)


def build(model: str, shape, classes: int):
    if model == "cnn_fc_w32":   # cnn_fc's structure at the cnn's 32/64 channels (not in nodes.models)
        return SmallCNN(shape, classes, width=32, hidden=256)
    return build_model(model, shape, classes)


def driver_scheme(p: Point, shapes, warmup: int):
    opts = {"ratio": p.density, "warmup_iterations": warmup}
    if p.driver == "lgc_ablation":
        opts["ae_iters"] = 1    # no coder to train: its LGC stage starts right after the warm-up
    elif p.driver != "dgc":
        raise ValueError(f"driver={p.driver!r}: allowed dgc, lgc_ablation")
    return build_scheme(p.driver, opts, n_workers=p.workers, shapes=shapes, payload_bytes=1470,
                        seed=p.seed)


def stage_of(it: int, warmup: int, iterations: int) -> int | None:
    if it < warmup:
        return None
    return min(2, (it - warmup) * 3 // (iterations - warmup))


def run_point(p: Point, data=None) -> dict:
    """Train, measure every iteration after the warm-up, return the point's record."""
    t0 = time.perf_counter()
    torch.manual_seed(p.seed)
    if data is None:
        extra = {"max_train": p.max_train} if p.max_train else {}
        data = load_dataset("fashion_mnist", seed=p.seed, max_test=2000, **extra)
    shards = split(data.train_y, p.workers, p.partition, alpha=0.5, seed=p.seed)
    torch.manual_seed(p.seed)
    model = build(p.model, data.input_shape, data.num_classes)
    pool = WorkerPool(model, data.train_x, data.train_y, shards, batch_size=p.batch, seed=p.seed)
    shapes = [q.shape for q in model.parameters()]
    warmup = max(1, p.iterations // 10)
    sch = driver_scheme(p, shapes, warmup)
    mem = sch.memory
    captured: dict[int, torch.Tensor] = {}
    compensate = mem.compensate

    def capture(w, g):     # v after accumulation, before the scheme takes anything out of it
        had = compensate(w, g)
        captured[w] = had.detach().clone()
        return had
    mem.compensate = capture

    n = pool.numel
    k = max(1, int(round(p.density * n)))
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    sums = [[0.0, 0.0, 0.0] for _ in STAGES]          # sxx, sxt, stt of the normalised pairs
    gsums = [[0.0, 0.0, 0.0] for _ in STAGES]         # the same of the raw gradients
    csums = [[0.0, 0.0, 0.0] for _ in STAGES]         # only the cyclic leader (it % N)
    per_it: list[dict] = []
    pairs: list[list[tuple[torch.Tensor, torch.Tensor]]] = [[] for _ in STAGES]   # per iteration
    losses = []
    for it in range(p.iterations):
        grads, loss = pool.gradients()
        losses.append(sum(loss) / len(loss))
        captured.clear()
        agg, _ = run_exchange(sch, it, grads)
        set_gradients(model, agg)
        opt.step()
        st = stage_of(it, warmup, p.iterations)
        if st is None:
            continue
        V = torch.stack([captured[w] for w in range(p.workers)])
        sets, X, T = leader_pairs(V, k)
        sxx, sxt, stt = float((X * X).sum()), float((X * T).sum()), float((T * T).sum())
        for i, v in enumerate((sxx, sxt, stt)):
            sums[st][i] += v
        share, jac = overlap(sets, n)
        beta, err = fit_from_sums(sxx, sxt, stt)
        lead = it % p.workers   # the leader LGC's cyclic default really uses this iteration
        cyc = (float((X[lead] ** 2).sum()), float((X[lead] * T[lead]).sum()), float((T[lead] ** 2).sum()))
        for i, v in enumerate(cyc):
            csums[st][i] += v
        # the same on this iteration's raw gradients: is anything shared before error feedback?
        gsets, GX, GT = leader_pairs(torch.stack([g.reshape(-1).float() for g in grads]), k)
        gs = (float((GX * GX).sum()), float((GX * GT).sum()), float((GT * GT).sum()))
        for i, v in enumerate(gs):
            gsums[st][i] += v
        per_it.append({"it": it, "stage": STAGES[st], "beta": beta, "fit_err": err,
                       "share": share, "jaccard": jac, "beta_grad": fit_from_sums(*gs)[0],
                       "share_grad": overlap(gsets, n)[0]})
        orders = [sign_order(x) for x in X]
        pairs[st].append((torch.stack([x[o] for x, o in zip(X, orders)]),
                          torch.stack([t[o] for t, o in zip(T, orders)])))
    measure_s = time.perf_counter() - t0
    _, acc = pool.evaluate(data.test_x, data.test_y)
    stages = {}
    for st, name in enumerate(STAGES):
        rows = [r for r in per_it if r["stage"] == name]
        if not rows:
            continue
        beta, err = fit_from_sums(*sums[st])
        betas = torch.tensor([r["beta"] for r in rows])
        stages[name] = {
            "iterations": [rows[0]["it"], rows[-1]["it"]],
            "beta": beta, "beta_sd_over_iterations": float(betas.std()) if len(rows) > 1 else 0.0,
            "beta_others": (p.workers * beta - 1) / (p.workers - 1), "fit_err": err,
            "share": sum(r["share"] for r in rows) / len(rows),
            "jaccard": sum(r["jaccard"] for r in rows) / len(rows),
            "beta_cyclic": fit_from_sums(*csums[st])[0], "fit_err_cyclic": fit_from_sums(*csums[st])[1],
            "beta_grad": fit_from_sums(*gsums[st])[0], "fit_err_grad": fit_from_sums(*gsums[st])[1],
            "share_grad": sum(r["share_grad"] for r in rows) / len(rows),
            **coder_errors(pairs[st], p),
        }
    share0, jac0 = chance_overlap(k, n)
    return {"point": asdict(p), "n": n, "k": k, "warmup": warmup, "inv_n": 1 / p.workers,
            "chance_share": share0, "chance_jaccard": jac0, "stages": stages,
            "final_test_acc": acc, "final_loss": sum(losses[-10:]) / len(losses[-10:]),
            "seconds": time.perf_counter() - t0, "train_measure_seconds": measure_s,
            "per_iteration": per_it, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "torch_threads": torch.get_num_threads()}


def coder_errors(its: list, p: Point) -> dict:
    """The AE trained on the first two thirds of a stage's iterations, held out on the rest;
    the scalar fitted on the same training pairs, and 1/N, on the same held-out pairs."""
    cut = max(1, (2 * len(its)) // 3)
    if len(its) - cut < 1:
        return {}
    Xtr = torch.cat([x for x, _ in its[:cut]])
    Ttr = torch.cat([t for _, t in its[:cut]])
    Xte = torch.cat([x for x, _ in its[cut:]])
    Tte = torch.cat([t for _, t in its[cut:]])
    ae = GradientAutoencoder(**AE_SHAPE, seed=p.seed)
    trainer = AETrainer(ae, lr=1e-3, batch=16, buffer=len(Xtr), seed=p.seed + 1)
    for x, t in zip(Xtr, Ttr):
        trainer.add(x, t)
    trainer.train(p.ae_steps)
    beta_tr, _ = scalar_fit(Xtr, Ttr)
    with torch.no_grad():
        ae_err = pooled_error(ae(Xte), Tte)
        ae_train_err = pooled_error(ae(Xtr), Ttr)
    return {"coder_err": ae_err, "coder_train_err": ae_train_err,
            "scalar_err": pooled_error(beta_tr * Xte, Tte), "scalar_beta_train": beta_tr,
            "inv_n_err": pooled_error(Xte / p.workers, Tte),
            "coder_pairs": [len(Xtr), len(Xte)]}


# ------------------------------------------------------------------ files, table, plot
def point_file(out: Path, name: str) -> Path:
    return out / f"{name}.json"


def load_all(out: Path) -> list[dict]:
    order = {p.name: i for i, p in enumerate(POINTS)}
    recs = [json.loads(f.read_text()) for f in sorted(out.glob("*.json"))]
    return sorted(recs, key=lambda r: order.get(r["point"]["name"], len(order)))


def describe(p: dict) -> str:
    part = "Dir(0.5)" if p["partition"] == "dirichlet" else "iid"
    drv = "" if p["driver"] == "dgc" else f", {p['driver']}"
    return (f"{p['model']}, N={p['workers']}, B={p['batch']}, {100 * p['density']:g}%, {part}, "
            f"{p['iterations']} it, s{p['seed']}{drv}")


def table(recs: list[dict]) -> str:
    head = ("| point | setting | stage | beta | 1/N | N*beta | beta_others | fit err | "
            "top-k share | chance | x chance | coder err (held out) | scalar err | 1/N err | "
            "grad N*beta | grad share x chance | cyclic leader only: N*beta, fit err | acc % |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in recs:
        p = r["point"]
        for name in STAGES:
            s = r["stages"].get(name)
            if s is None:
                continue
            first = name == STAGES[0]
            lines.append(
                f"| {p['name'] if first else ''} | {describe(p) if first else ''} | {name} "
                f"{s['iterations'][0]}-{s['iterations'][1]} | {s['beta']:.3f} ± {s['beta_sd_over_iterations']:.3f} | "
                f"{r['inv_n']:.3f} | {p['workers'] * s['beta']:.2f} | {s['beta_others']:+.3f} | "
                f"{s['fit_err']:.3f} | {s['share']:.4f} | {r['chance_share']:.4f} | "
                f"{s['share'] / r['chance_share']:.1f} | {s.get('coder_err', float('nan')):.3f} | "
                f"{s.get('scalar_err', float('nan')):.3f} | {s.get('inv_n_err', float('nan')):.3f} | "
                f"{p['workers'] * s['beta_grad']:.2f} | {s['share_grad'] / r['chance_share']:.1f} | "
                f"{p['workers'] * s.get('beta_cyclic', float('nan')):.2f}, "
                f"{s.get('fit_err_cyclic', float('nan')):.3f} | "
                f"{100 * r['final_test_acc']:.1f} |")
    return "\n".join(lines)


SAME = (70, 99)   # iterations every point measures (b512's late stage): stage-free comparison


def same_iterations(r: dict) -> tuple[float, float]:
    """N*beta of the memories and of the raw gradients, mean of the per-iteration values over
    the iterations SAME (nan when the run has none of them)."""
    rows = [x for x in r["per_iteration"] if SAME[0] <= x["it"] <= SAME[1]]
    if not rows:
        return float("nan"), float("nan")
    N = r["point"]["workers"]
    return (N * sum(x["beta"] for x in rows) / len(rows),
            N * sum(x["beta_grad"] for x in rows) / len(rows))


def summary(recs: list[dict]) -> str:
    """One row per point: N*beta per stage (memories, then raw gradients), the late stage's
    top-k share over chance, the held-out coder against the scalar, final accuracy."""
    head = ("| point | setting | N*beta v: early / mid / late | N*beta grad: early / mid / late | "
            f"N*beta v / grad, it {SAME[0]}-{SAME[1]} | beta_others late | top-k share x chance, v / grad (late) | late held-out err: coder / "
            "scalar / 1/N | acc % | wall s |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in recs:
        p, st, N = r["point"], r["stages"], r["point"]["workers"]
        late = st[STAGES[-1]]
        nb = " / ".join(f"{N * st[n]['beta']:.2f}" for n in STAGES if n in st)
        ng = " / ".join(f"{N * st[n]['beta_grad']:.2f}" for n in STAGES if n in st)
        same = " / ".join(f"{v:.2f}" for v in same_iterations(r))
        lines.append(
            f"| {p['name']} | {describe(p)} | {nb} | {ng} | {same} | {late['beta_others']:+.3f} | "
            f"{late['share'] / r['chance_share']:.1f} / {late['share_grad'] / r['chance_share']:.1f} | "
            f"{late.get('coder_err', float('nan')):.3f} / {late.get('scalar_err', float('nan')):.3f} / "
            f"{late.get('inv_n_err', float('nan')):.3f} | {100 * r['final_test_acc']:.1f} | "
            f"{r['seconds']:.0f} |")
    return "\n".join(lines)


def svg(recs: list[dict]) -> str:
    """Three panels, one line per point over the stages: beta_others of the memories (0 =
    nothing shared), of the raw gradients, and the memories' top-k share over chance."""
    W, H, pad, gap = 1260, 420, 60, 70
    pw = (W - 2 * pad - 2 * gap) / 3
    ph = H - 2 * pad - 20
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
               "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39"]
    def others(r, beta):   # what one other node holds of the leader's value: 0 = nothing shared
        N = r["point"]["workers"]
        return (N * beta - 1) / (N - 1)
    panels = [("memories v: beta_others (0 = nothing shared)", lambda r, s: others(r, s["beta"]), 0.0),
              ("raw gradients: beta_others", lambda r, s: others(r, s["beta_grad"]), 0.0),
              ("memories v: top-k share / chance (1 = chance)", lambda r, s: s["share"] / r["chance_share"], 1.0)]
    both = [others(r, s[key]) for r in recs for s in r["stages"].values() for key in ("beta", "beta_grad")]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H + 14 * ((len(recs) + 3) // 4)}" '
           f'font-family="sans-serif" font-size="11">', '<rect width="100%" height="100%" fill="white"/>']
    for pi, (title, f, ref) in enumerate(panels):
        x0 = pad + pi * (pw + gap)
        vals = (both if pi < 2 else [f(r, s) for r in recs for s in r["stages"].values()]) or [1.0]
        lo, hi = min(0.0, min(vals)), max(vals) * 1.1 or 1.0   # both beta panels on one scale

        def y(v, lo=lo, hi=hi):
            return pad + ph - (v - lo) / (hi - lo) * ph

        def x(i, x0=x0):
            return x0 + (i + 0.5) * pw / len(STAGES)
        out.append(f'<text x="{x0 + pw / 2}" y="{pad - 20}" text-anchor="middle" font-size="13">{title}</text>')
        out.append(f'<rect x="{x0}" y="{pad}" width="{pw}" height="{ph}" fill="none" stroke="black"/>')
        for t in range(6):
            v = lo + (hi - lo) * t / 5
            out.append(f'<line x1="{x0 - 4}" x2="{x0}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="black"/>'
                       f'<text x="{x0 - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.2f}</text>')
        for i, name in enumerate(STAGES):
            out.append(f'<text x="{x(i):.1f}" y="{pad + ph + 16}" text-anchor="middle">{name}</text>')
        out.append(f'<line x1="{x0}" x2="{x0 + pw}" y1="{y(ref):.1f}" y2="{y(ref):.1f}" '
                   f'stroke="black" stroke-dasharray="4,3"/>')
        for ri, r in enumerate(recs):
            c = palette[ri % len(palette)]
            pts = [(x(i), y(f(r, r["stages"][n]))) for i, n in enumerate(STAGES) if n in r["stages"]]
            out.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.5" points="'
                       + " ".join(f"{a:.1f},{b:.1f}" for a, b in pts) + '"/>')
            out += [f'<circle cx="{a:.1f}" cy="{b:.1f}" r="2.5" fill="{c}"/>' for a, b in pts]
    for ri, r in enumerate(recs):
        c = palette[ri % len(palette)]
        lx, ly = pad + (ri % 4) * (W - 2 * pad) / 4, H + 14 * (ri // 4) - 10
        out.append(f'<rect x="{lx}" y="{ly - 8}" width="10" height="10" fill="{c}"/>'
                   f'<text x="{lx + 14}" y="{ly + 1}">{r["point"]["name"]}</text>')
    out.append("</svg>")
    return "\n".join(out)


def report(out: Path) -> str:
    recs = load_all(out)
    text = table(recs)
    (out / "table.md").write_text(text + "\n")
    short = summary(recs)
    (out / "summary.md").write_text(short + "\n")
    (out / "redundancy.svg").write_text(svg(recs))
    return short + "\n\n" + text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m experiments.results.redundancy")
    ap.add_argument("--points", default="", help=f"comma-separated names; all: {','.join(p.name for p in POINTS)}")
    ap.add_argument("--out", default=str(OUT), help="folder of the per-point JSON files")
    ap.add_argument("--report", action="store_true", help="only build table.md and the SVG from disk")
    ap.add_argument("--quick", action="store_true", help="one tiny point (seconds), into --out")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.report:
        print(report(out))
        return 0
    if args.quick:
        points = [QUICK]
    else:
        known = {p.name: p for p in POINTS}
        names = [s for s in args.points.split(",") if s] or list(known)
        bad = [s for s in names if s not in known]
        if bad:
            print(f"--points={','.join(bad)}: not known; allowed: {', '.join(known)}", file=sys.stderr)
            return 2
        points = [known[s] for s in names]
    for p in points:
        f = point_file(out, p.name)
        if f.exists() and not args.quick:
            print(f"{p.name}: done already ({f})", flush=True)
            continue
        rec = run_point(p)
        f.write_text(json.dumps(rec, indent=1))
        s = rec["stages"]
        print(f"{p.name}: {rec['seconds']:.0f} s; " + "; ".join(
            f"{n} beta {v['beta']:.3f} (1/N {rec['inv_n']:.3f}) share/chance "
            f"{v['share'] / rec['chance_share']:.1f} coder {v.get('coder_err', float('nan')):.3f} "
            f"scalar {v.get('scalar_err', float('nan')):.3f}" for n, v in s.items()), flush=True)
    print(report(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
