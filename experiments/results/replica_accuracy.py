"""Test accuracy of the server's model and of each worker's replica (the model plus its drift,
nodes/replicas.py) at a run's checkpoint: what a lossy best-effort downlink does to the workers.

    .venv/bin/python -m experiments.results.replica_accuracy FILE CHECKPOINT [--set KEY=VALUE ...]

FILE and the --set values must be the run's (the checkpoint is STORE.checkpoints/run-N.pt).
"""
from __future__ import annotations

import argparse

import torch

from nodes.workers import evaluate, unflatten
from testbed import api
from testbed.records.store import Store
from testbed.run import checkpoint


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("checkpoint")
    ap.add_argument("--set", action="append", default=[], dest="sets")
    args = ap.parse_args(argv)
    exp = api.build_experiment(api.load(args.file, args.sets), Store(":memory:"))
    state = checkpoint.load(args.checkpoint)
    exp.driver.load_state_dict(state["driver"])
    theta = torch.cat([p.detach().reshape(-1) for p in exp.training.model.parameters()])
    shapes = [p.shape for p in exp.training.model.parameters()]
    print(f"after iteration {state['loop']['iteration']}: model L2 norm {float(theta.norm()):.4f}")
    print(f"server   test accuracy {exp.driver.evaluate()[1]:.4%}")
    for w, name in enumerate(exp.world.workers):
        d = exp.driver.replicas.drift.get(w)
        acc = exp.driver.evaluate()[1] if d is None else evaluate(
            exp.training.model, exp.training.data.test_x, exp.training.data.test_y, params=unflatten(theta + d, shapes))[1]
        print(f"{name:<8} test accuracy {acc:.4%}  drift {exp.driver.replicas.norm(w):.4f}")


if __name__ == "__main__":
    main()
