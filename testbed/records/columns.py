"""The store's schema, written once: every table's columns with their SQL type, unit and meaning.

testbed/records/store.py builds everything from this declaration: the DDL of a new store
(`schema_sql`: every table with every column, its key and its indexes), the migration of a store
made before a column existed (`added_columns`: the columns declared with `added`, which such a
store gains when opened for writing) and the lists of columns it writes and reads
(`column_names`). docs/reference/store.md is generated from it (`python -m testbed.reference`),
and tests/testbed/test_store_columns.py checks that a new store and a migrated old one have
exactly these columns, in this order. Virtual-time columns end in `_s`; `wall_time_s` is this
machine's clock. Units: "" where a column is a name, a count or a label.
"""
from __future__ import annotations

from typing import NamedTuple


class Column(NamedTuple):
    sql: str            # its type and constraints in the CREATE TABLE
    unit: str
    meaning: str
    added: bool = False   # added after stores were first written: an old store may lack it
    part: str = ""      # runs only: "" its own, or json | summary | sweep | key (`column_names`)


C = Column


def added(sql: str, unit: str, meaning: str, *, part: str = "") -> Column:
    """A column added to its table after stores were first written (the migration adds it, at
    the end of the table: so an added column is declared after every original one)."""
    return Column(sql, unit, meaning, added=True, part=part)


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
        "id": C("INTEGER PRIMARY KEY AUTOINCREMENT", "", "the run's id (`testbed export ID`)"),
        "name": C("TEXT NOT NULL", "", "run.name, or the name given with --name"),
        "method": C("TEXT", "", "compression.method"),
        "topology": C("TEXT", "", "network.topology"),
        "workers": C("INTEGER", "", "network.workers"),
        "bandwidth_mbps": C("REAL", "Mbit/s", "network.link.bandwidth_mbps at the start"),
        "status": C("TEXT NOT NULL", "", "running | completed | failed | stopped | pruned (`testbed tune`'s "
                                         "pruner ended it)"),
        "config_json": C("TEXT NOT NULL", "", "the validated experiment file, every default filled in (JSON)", part="json"),
        "graph_json": C("TEXT", "", "the network graph: nodes, roles, positions, links (JSON)", part="json"),
        "started_at": C("REAL", "Unix s", "when the run started (wall clock)"),
        "ended_at": C("REAL", "Unix s", "when it ended (wall clock); NULL while running"),
        "pid": C("INTEGER", "", "the writer's process id (a run whose writer is gone is marked failed)"),
        "host": C("TEXT", "", "the writer's host name"),
        "error": C("TEXT", "", "why a failed or stopped run ended, one line"),
        # summaries kept up to date by the writer in the same transaction as the rows they
        # summarise, so listing 50 runs of 5,000 iterations never rescans their rows
        "last_iteration": C("INTEGER", "", "the last iteration written", part="summary"),
        "virtual_time_s": C("REAL", "s", "virtual time at the last iteration", part="summary"),
        "total_bits": C("INTEGER NOT NULL DEFAULT 0", "bit", "every bit on the wire so far, up and down, all nodes", part="summary"),
        "best_accuracy": C("REAL", "[0, 1]", "best test accuracy so far", part="summary"),
        "energy_j": added("REAL", "J", "every worker's joules so far, radio and compute", part="summary"),
        "sweep": added("TEXT", "", "the sweep the run belongs to (its base name), or the `testbed tune` "
                                   "study; NULL for other runs", part="sweep"),
        "sweep_params": added("TEXT", "", "the run's grid values in its sweep (a tune trial's parameters), "
                                          "JSON {key: value}", part="sweep"),
        "sweep_key": added("TEXT", "", "the sweep's identity (sweeps.key): a rerun skips what completed", part="key"),
        "trial": added("INTEGER", "", "a `testbed tune` trial's number in its study (runs.sweep); NULL for "
                                      "other runs", part="sweep"),
    },
    "sweeps": {
        "key": C("TEXT PRIMARY KEY", "", "the sweep's identity, from its file content, grid, overrides and seeds"),
        "name": C("TEXT NOT NULL", "", "the sweep's base name"),
        "spec_json": C("TEXT NOT NULL", "", "what the sweep command asked for (JSON); a tune study's has "
                                            "\"kind\": \"tune\""),
        "created_at": C("REAL", "Unix s", "when it was first run"),
    },
    "iterations": {
        "run_id": C("INTEGER NOT NULL", "", "runs.id"),
        "iteration": C("INTEGER NOT NULL", "", "0-based"),
        "stage": C("TEXT", "", "the method's stage (e.g. warmup, ae_train, lgc), else NULL"),
        "virtual_time_s": C("REAL", "s", "virtual time at the iteration's end"),
        "wall_time_s": C("REAL", "s", "this machine's seconds since the run started"),
        "train_loss": C("REAL", "", "mean training loss of the workers' batches"),
        "bits_up": C("INTEGER", "bit", "what the workers sent, every header, index and value byte"),
        "bits_down": C("INTEGER", "bit", "what the workers received"),
        "compute_s": C("REAL", "s", "virtual: from the iteration's start until the workers' compute ended"),
        "uplink_s": C("REAL", "s", "virtual: from the end of compute to the last update's arrival"),
        "aggregation_s": C("REAL", "s", "virtual: the aggregator's compute"),
        "downlink_s": C("REAL", "s", "virtual: sending the aggregate back"),
        "left_out": added("INTEGER", "", "workers the aggregate went without (deadline, away, lost)"),
        "energy_j": added("REAL", "J", "the workers' joules in the iteration, radio and compute"),
        "participants": added("INTEGER", "", "federated: clients whose updates counted; else NULL"),
        "staleness": added("REAL", "server versions", "federated: the counted updates' mean staleness; else NULL"),
        "replies_ok": added("INTEGER", "", "Flower: replies the strategy got; else NULL"),
        "replies_failed": added("INTEGER", "", "Flower: error replies (the ClientApp raised); else NULL"),
        "replies_lost": added("INTEGER", "", "Flower: replies never got (node away, message or reply lost)"),
        "replies_late": added("INTEGER", "", "Flower: replies past the timeout"),
    },
    "node_iterations": {
        "run_id": C("INTEGER NOT NULL", "", "runs.id"),
        "iteration": C("INTEGER NOT NULL", "", "0-based"),
        "node": C("TEXT NOT NULL", "", "w0, w1, ... (federated: the slot a client sends from)"),
        "bits_up": C("INTEGER", "bit", "what the node sent"),
        "bits_down": C("INTEGER", "bit", "what it received"),
        "compute_s": C("REAL", "s", "virtual: its compute time"),
        "uplink_done_s": C("REAL", "s", "virtual: when its update arrived, from the iteration's start"),
        "left_out": added("TEXT", "", "NULL when its update counted, else deadline | unavailable | lost | "
                                      "failed (Flower: its ClientApp raised)"),
        "radio_j": added("REAL", "J", "radio joules: transmit, receive, idle-listen, sleep"),
        "compute_j": added("REAL", "J", "compute joules"),
        "energy_j": added("REAL", "J", "radio_j + compute_j"),
        "drift_norm": added("REAL", "", "L2 norm of its replica minus the server's model (best-effort "
                                        "downlinks that lost packets); NULL in federated runs"),
        "staleness": added("INTEGER", "server versions", "federated: the staleness of its client's update if "
                                                         "it counted (0 in sync rounds); else NULL"),
    },
    "links": {
        "run_id": C("INTEGER NOT NULL", "", "runs.id"),
        "iteration": C("INTEGER NOT NULL", "", "0-based"),
        "src": C("TEXT NOT NULL", "", "sending node"),
        "dst": C("TEXT NOT NULL", "", "receiving node"),
        "bytes": C("INTEGER", "byte", "bytes delivered, headers included"),
        "packets": C("INTEGER", "", "packets sent, retransmissions included"),
        "lost": C("INTEGER", "", "packets lost on the link"),
        "retransmitted": C("INTEGER", "", "packets resent by reliable delivery"),
        "busy_s": C("REAL", "s", "virtual: time the link spent sending"),
        "snr_db": added("REAL", "dB", "mean SNR of the iteration's transmissions on a fading link, else NULL"),
        "collisions": added("INTEGER DEFAULT 0", "", "CSMA: attempts that collided"),
        "retries": added("INTEGER DEFAULT 0", "", "CSMA: MAC retransmissions"),
    },
    "evals": {
        "run_id": C("INTEGER NOT NULL", "", "runs.id"),
        "iteration": C("INTEGER NOT NULL", "", "the iteration after which the model was evaluated"),
        "virtual_time_s": C("REAL", "s", "virtual time then"),
        "test_loss": C("REAL", "", "mean test loss"),
        "test_accuracy": C("REAL", "[0, 1]", "test accuracy"),
        "lgc_beta": added("REAL", "", "LGC stage: the best scalar multiple of the leader's values fitting the "
                                      "nodes' mean memory at its positions (mean since the last evaluation)"),
        "lgc_scalar_error": added("REAL", "", "LGC stage: that fit's relative error"),
        "lgc_coder_error": added("REAL", "", "LGC stage: relative error of what the aggregate credits at the "
                                             "leader's positions against the nodes' mean there"),
    },
    "events": {
        "id": C("INTEGER PRIMARY KEY AUTOINCREMENT", "", "row id"),
        "run_id": C("INTEGER NOT NULL", "", "runs.id"),
        "iteration": C("INTEGER", "", "when it happened"),
        "virtual_time_s": C("REAL", "s", "virtual time then"),
        "kind": C("TEXT NOT NULL", "", "start, stage, note, control, target_reached, error, ..."),
        "detail_json": C("TEXT", "", "what happened (JSON)"),
    },
    "controls": {
        "id": C("INTEGER PRIMARY KEY AUTOINCREMENT", "", "row id"),
        "run_id": C("INTEGER NOT NULL", "", "runs.id"),
        "created_at": C("REAL NOT NULL", "Unix s", "when it was asked for"),
        "target": C("TEXT NOT NULL", "", "the links it steers ('*', or SRC->DST)"),
        "changes_json": C("TEXT NOT NULL", "", "the link keys and their new values (JSON)"),
        "status": C("TEXT NOT NULL DEFAULT 'pending'", "", "pending | applied | rejected"),
        "applied_iteration": C("INTEGER", "", "the iteration it was applied at"),
        "message": C("TEXT", "", "why it was rejected, or a note"),
    },
}

# Table keys of more than one column (a one-column key is in its column's SQL) and indexes.
KEYS = {"iterations": ("run_id", "iteration"), "node_iterations": ("run_id", "iteration", "node"),
        "links": ("run_id", "iteration", "src", "dst"), "evals": ("run_id", "iteration")}
INDEXES = {"controls_pending": ("controls", ("run_id", "status")),
           "events_run": ("events", ("run_id", "iteration"))}


def schema_sql() -> str:
    """The SQL that makes a new store, or the tables and indexes an older one lacks (IF NOT
    EXISTS): every table with every declared column."""
    out = []
    for table, columns in COLUMNS.items():
        lines = [f"{name} {col.sql}" for name, col in columns.items()]
        if table in KEYS:
            lines.append(f"PRIMARY KEY ({', '.join(KEYS[table])})")
        out.append(f"CREATE TABLE IF NOT EXISTS {table} (\n    " + ",\n    ".join(lines) + "\n);")
    out += [f"CREATE INDEX IF NOT EXISTS {name} ON {table} ({', '.join(cols)});"
            for name, (table, cols) in INDEXES.items()]
    return "\n".join(out) + "\n"


def added_columns() -> dict[str, dict[str, str]]:
    """{table: {column: its SQL}} of the columns added after stores were first written, in
    declaration order (the order a migrated store gains them)."""
    out = {table: {name: col.sql for name, col in columns.items() if col.added}
           for table, columns in COLUMNS.items()}
    return {table: cols for table, cols in out.items() if cols}


def column_names(table: str, part: str | None = None) -> list[str]:
    """The columns of `table` a row of one run is written and read with (every one but
    `run_id`), or those of one `part` of a runs row."""
    return [name for name, col in COLUMNS[table].items()
            if name != "run_id" and (part is None or col.part == part)]
