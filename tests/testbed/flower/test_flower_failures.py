"""A failing node as Flower delivers it: a ClientApp that raises answers with an error reply,
the strategy aggregates the others and the run goes on, checked against Flower's own
simulation runtime on the same app and fault."""
from __future__ import annotations

import numpy as np
from flwr.serverapp.strategy import FedAdam

from testbed import cli
from testbed.records.store import Store
from tests.testbed.flower.flower_runs import (
    EXAMPLE,
    aggregates_of,
    driver,
    simulation_aggregates,
)

# every node trains and evaluates each round, so both runtimes address the same nodes;
# partition 3's every train call raises
FAULT = ["num-server-rounds=2", "fraction-train=1.0", "fraction-evaluate=1.0",
         "fail-partition=3"]


def test_the_strategy_gets_what_flowers_simulation_gives_it(tmp_path):
    """Under Flower's run_simulation and over our emulated grid the strategy receives, round by
    round, 9 results and 1 failure in training and 10 results in evaluation, and returns the
    same arrays. Equal to float32 rounding, not bit for bit: Flower's grid hands the replies
    over in the order they arrived, ours in the strategy's message order, and a weighted sum
    taken in another order differs in its last bits (about 1e-7 here)."""
    flower = simulation_aggregates(EXAMPLE, FAULT, "FedAdam", tmp_path)
    with aggregates_of(FedAdam) as ours:
        rounds = list(driver(EXAMPLE, run_config=FAULT).rounds(0))
    assert [a[:4] for a in flower] == [("train", 1, 9, 1), ("evaluate", 1, 10, 0),
                                       ("train", 2, 9, 1), ("evaluate", 2, 10, 0)]
    assert [a[:4] for a in ours] == [a[:4] for a in flower]
    for mine, theirs in zip(ours, flower):
        if mine[4] is not None:
            assert mine[4].keys() == theirs[4].keys()
            for k in mine[4]:
                np.testing.assert_allclose(mine[4][k], theirs[4][k], rtol=0, atol=1e-6, err_msg=k)
    assert [r.replies for r in rounds] == [{"ok": 9, "failed": 1, "lost": 0, "late": 0},
                                           {"ok": 10, "failed": 0, "lost": 0, "late": 0}] * 2


def final_accuracy(tmp_path, name: str, *run_config: str) -> tuple[int, list[dict], float]:
    store = tmp_path / f"{name}.db"
    args = ["flower", "run", str(EXAMPLE), "--store", str(store), "--quiet"]
    for item in run_config:
        args += ["--run-config", item]
    code = cli.main(args)
    with Store(store, readonly=True) as s:
        return code, s.iterations(1), s.evals(1)[-1]["test_accuracy"]


def test_a_node_failing_every_train_call_costs_the_app_little(tmp_path):
    """The example app (FedAdam, 10 nodes, 6 server rounds, 5 trained per round) with node 3
    failing every train call it is sampled for completes all its rounds, its failures
    counted in the rounds that sampled it, within 2 accuracy points of the run without."""
    code, its, acc = final_accuracy(tmp_path, "fault", "fail-partition=3")
    assert code == 0 and len(its) == 12
    assert its[-1]["virtual_time_s"] < 60     # no round waited for FedAvg's 3600 s timeout
    failed = [r["replies_failed"] for r in its]
    assert failed[1::2] == [0] * 6 and sum(failed) >= 1          # evaluate rounds never fail
    assert all(r["replies_ok"] + r["replies_failed"] == 5 for r in its[0::2])
    clean_code, _, clean_acc = final_accuracy(tmp_path, "clean")
    assert clean_code == 0 and abs(acc - clean_acc) <= 0.02, (acc, clean_acc)


def test_a_call_that_raised_leaves_the_nodes_context_as_it_was():
    """Flower keeps a node's context only from a call that returned (its SuperNode does not
    store the context of a ClientApp that raised; its simulation keeps the one from before):
    a call that counts in the state and then raises leaves the count where it was."""
    from flwr.app import ConfigRecord, Message, RecordDict
    from flwr.clientapp import ClientApp

    from testbed.flower.driver import flower_identity
    from testbed.flower.grid import LocalGrid

    app = ClientApp()

    @app.train()
    def train(msg, context):
        n = context.state["calls"]["n"] if "calls" in context.state else 0
        context.state["calls"] = ConfigRecord({"n": n + 1})
        if msg.content["config"]["fail"]:
            raise ValueError("failed after counting")
        return Message(RecordDict(), reply_to=msg)

    grid = LocalGrid(app, 1, {})
    node = grid.node_ids[0]
    with flower_identity(1):
        replies = [grid.send_and_receive([Message(RecordDict({"config": ConfigRecord(
            {"fail": fail})}), node, "train")])[0] for fail in (False, True, False)]
    assert [m.has_error() for m in replies] == [False, True, False]
    assert replies[1].error.reason == "<class 'ValueError'>:<'failed after counting'>"
    assert grid.contexts[node].state["calls"]["n"] == 2
