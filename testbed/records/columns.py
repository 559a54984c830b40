"""What every column of the store means, with its unit: the one description of the store's schema.

The tables are created by testbed/records/store.py (its SQL); this module says what they hold,
and tests/testbed/test_store_columns.py checks that it names exactly the columns a new store has.
docs/reference/store.md is generated from it (`python -m testbed.reference`). Virtual-time
columns end in `_s`; `wall_time_s` is this machine's clock. Units: "" where a column is a name,
a count or a label.
"""
from __future__ import annotations

from typing import NamedTuple


class Column(NamedTuple):
    unit: str
    meaning: str


C = Column
TABLE_MEANINGS = {
    "runs": "one row per run",
    "sweeps": "one row per `testbed sweep` command (its file, grid, overrides and seeds) and "
              "per `testbed tune` study (its parameters, objectives, constraints and target)",
    "iterations": "one row per iteration of a run (a round of a federated run, a "
                  "send_and_receive of a Flower app); bits summed over the nodes",
    "node_iterations": "one row per node and iteration",
    "links": "one row per directed link and iteration",
    "evals": "one row per evaluation on the test set",
    "events": "stage switches, controls applied, notes: one row each",
    "controls": "steering requests (`testbed control`, the dashboard) and what became of them",
}

COLUMNS: dict[str, dict[str, Column]] = {
    "runs": {
        "id": C("", "the run's id (`testbed export ID`)"),
        "name": C("", "run.name, or the name given with --name"),
        "method": C("", "compression.method"),
        "topology": C("", "network.topology"),
        "workers": C("", "network.workers"),
        "bandwidth_mbps": C("Mbit/s", "network.link.bandwidth_mbps at the start"),
        "status": C("", "running | completed | failed | stopped | pruned (`testbed tune`'s "
                        "pruner ended it)"),
        "config_json": C("", "the validated experiment file, every default filled in (JSON)"),
        "graph_json": C("", "the network graph: nodes, roles, positions, links (JSON)"),
        "started_at": C("Unix s", "when the run started (wall clock)"),
        "ended_at": C("Unix s", "when it ended (wall clock); NULL while running"),
        "pid": C("", "the writer's process id (a run whose writer is gone is marked failed)"),
        "host": C("", "the writer's host name"),
        "error": C("", "why a failed or stopped run ended, one line"),
        "last_iteration": C("", "the last iteration written"),
        "virtual_time_s": C("s", "virtual time at the last iteration"),
        "total_bits": C("bit", "every bit on the wire so far, up and down, all nodes"),
        "best_accuracy": C("[0, 1]", "best test accuracy so far"),
        "energy_j": C("J", "every worker's joules so far, radio and compute"),
        "sweep": C("", "the sweep the run belongs to (its base name), or the `testbed tune` "
                       "study; NULL for other runs"),
        "sweep_params": C("", "the run's grid values in its sweep (a tune trial's parameters), "
                              "JSON {key: value}"),
        "sweep_key": C("", "the sweep's identity (sweeps.key): a rerun skips what completed"),
        "trial": C("", "a `testbed tune` trial's number in its study (runs.sweep); NULL for "
                       "other runs"),
    },
    "sweeps": {
        "key": C("", "the sweep's identity, from its file content, grid, overrides and seeds"),
        "name": C("", "the sweep's base name"),
        "spec_json": C("", "what the sweep command asked for (JSON); a tune study's has "
                           "\"kind\": \"tune\""),
        "created_at": C("Unix s", "when it was first run"),
    },
    "iterations": {
        "run_id": C("", "runs.id"),
        "iteration": C("", "0-based"),
        "stage": C("", "the method's stage (e.g. warmup, ae_train, lgc), else NULL"),
        "virtual_time_s": C("s", "virtual time at the iteration's end"),
        "wall_time_s": C("s", "this machine's seconds since the run started"),
        "train_loss": C("", "mean training loss of the workers' batches"),
        "bits_up": C("bit", "what the workers sent, every header, index and value byte"),
        "bits_down": C("bit", "what the workers received"),
        "compute_s": C("s", "virtual: from the iteration's start until the workers' compute ended"),
        "uplink_s": C("s", "virtual: from the end of compute to the last update's arrival"),
        "aggregation_s": C("s", "virtual: the aggregator's compute"),
        "downlink_s": C("s", "virtual: sending the aggregate back"),
        "left_out": C("", "workers the aggregate went without (deadline, away, lost)"),
        "energy_j": C("J", "the workers' joules in the iteration, radio and compute"),
        "participants": C("", "federated: clients whose updates counted; else NULL"),
        "staleness": C("server versions", "federated: the counted updates' mean staleness; else NULL"),
        "replies_ok": C("", "Flower: replies the strategy got; else NULL"),
        "replies_failed": C("", "Flower: error replies (the ClientApp raised); else NULL"),
        "replies_lost": C("", "Flower: replies never got (node away, message or reply lost)"),
        "replies_late": C("", "Flower: replies past the timeout"),
    },
    "node_iterations": {
        "run_id": C("", "runs.id"),
        "iteration": C("", "0-based"),
        "node": C("", "w0, w1, ... (federated: the slot a client sends from)"),
        "bits_up": C("bit", "what the node sent"),
        "bits_down": C("bit", "what it received"),
        "compute_s": C("s", "virtual: its compute time"),
        "uplink_done_s": C("s", "virtual: when its update arrived, from the iteration's start"),
        "left_out": C("", "NULL when its update counted, else deadline | unavailable | lost | "
                          "failed (Flower: its ClientApp raised)"),
        "radio_j": C("J", "radio joules: transmit, receive, idle-listen, sleep"),
        "compute_j": C("J", "compute joules"),
        "energy_j": C("J", "radio_j + compute_j"),
        "drift_norm": C("", "L2 norm of its replica minus the server's model (best-effort "
                            "downlinks that lost packets); NULL in federated runs"),
        "staleness": C("server versions", "federated: the staleness of its client's update if "
                                          "it counted (0 in sync rounds); else NULL"),
    },
    "links": {
        "run_id": C("", "runs.id"),
        "iteration": C("", "0-based"),
        "src": C("", "sending node"),
        "dst": C("", "receiving node"),
        "bytes": C("byte", "bytes delivered, headers included"),
        "packets": C("", "packets sent, retransmissions included"),
        "lost": C("", "packets lost on the link"),
        "retransmitted": C("", "packets resent by reliable delivery"),
        "busy_s": C("s", "virtual: time the link spent sending"),
        "snr_db": C("dB", "mean SNR of the iteration's transmissions on a fading link, else NULL"),
        "collisions": C("", "CSMA: attempts that collided"),
        "retries": C("", "CSMA: MAC retransmissions"),
    },
    "evals": {
        "run_id": C("", "runs.id"),
        "iteration": C("", "the iteration after which the model was evaluated"),
        "virtual_time_s": C("s", "virtual time then"),
        "test_loss": C("", "mean test loss"),
        "test_accuracy": C("[0, 1]", "test accuracy"),
        "lgc_beta": C("", "LGC stage: the best scalar multiple of the leader's values fitting the "
                          "nodes' mean memory at its positions (mean since the last evaluation)"),
        "lgc_scalar_error": C("", "LGC stage: that fit's relative error"),
        "lgc_coder_error": C("", "LGC stage: relative error of what the aggregate credits at the "
                                 "leader's positions against the nodes' mean there"),
    },
    "events": {
        "id": C("", "row id"),
        "run_id": C("", "runs.id"),
        "iteration": C("", "when it happened"),
        "virtual_time_s": C("s", "virtual time then"),
        "kind": C("", "start, stage, note, control, target_reached, error, ..."),
        "detail_json": C("", "what happened (JSON)"),
    },
    "controls": {
        "id": C("", "row id"),
        "run_id": C("", "runs.id"),
        "created_at": C("Unix s", "when it was asked for"),
        "target": C("", "the links it steers ('*', or SRC->DST)"),
        "changes_json": C("", "the link keys and their new values (JSON)"),
        "status": C("", "pending | applied | rejected"),
        "applied_iteration": C("", "the iteration it was applied at"),
        "message": C("", "why it was rejected, or a note"),
    },
}
