"""Binned reads of a run's per-iteration tables, for long runs.

A 5,000-iteration run has 5,000 iteration rows and 8 link rows per iteration; reading them all
row by row and drawing every point is what makes a dashboard slow. These queries let SQLite
average `stride` consecutive iterations into one point (bin b holds iterations
b*stride .. b*stride+stride-1; the point sits at the bin's last iteration) and return rows with
the same column names as `Store.iterations()` / `node_iterations()` / `links()`, plus
`bits_sum`, `bits_up_sum`, `bits_down_sum` (the bin's total bits, for cumulative figures) and
`n` (iterations in the bin); link rows also carry the `virtual_time_s` of their bin's end.
With stride 1 a bin is one iteration and the rows equal the store's.

Reads only, on the store's connection, every value a bound parameter; the schema is the one
documented in testbed/records/store.py.
"""
from __future__ import annotations

import sqlite3


def _rows(db: sqlite3.Connection, sql: str, args: tuple) -> list[dict]:
    cur = db.execute(sql, args)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def last_iteration(db: sqlite3.Connection, run_id: int) -> int | None:
    return db.execute("SELECT MAX(iteration) FROM iterations WHERE run_id=?", (run_id,)).fetchone()[0]


def iterations(db: sqlite3.Connection, run_id: int, after: int, upto: int, stride: int) -> list[dict]:
    """Iteration rows with after < iteration <= upto, averaged over bins of `stride`."""
    return _rows(db, """
        SELECT MAX(iteration) AS iteration, MAX(virtual_time_s) AS virtual_time_s,
               MAX(wall_time_s) AS wall_time_s, AVG(train_loss) AS train_loss,
               AVG(bits_up) AS bits_up, AVG(bits_down) AS bits_down,
               SUM(COALESCE(bits_up, 0) + COALESCE(bits_down, 0)) AS bits_sum,
               SUM(bits_up) AS bits_up_sum, SUM(bits_down) AS bits_down_sum,
               AVG(compute_s) AS compute_s, AVG(uplink_s) AS uplink_s,
               AVG(aggregation_s) AS aggregation_s, AVG(downlink_s) AS downlink_s,
               SUM(left_out) AS left_out, AVG(participants) AS participants,
               AVG(staleness) AS staleness, SUM(replies_ok) AS replies_ok,
               SUM(replies_failed) AS replies_failed, SUM(replies_lost) AS replies_lost,
               SUM(replies_late) AS replies_late, COUNT(*) AS n
        FROM iterations WHERE run_id=? AND iteration > ? AND iteration <= ?
        GROUP BY iteration / ? ORDER BY 1""", (run_id, after, upto, stride))


def node_iterations(db: sqlite3.Connection, run_id: int, after: int, upto: int, stride: int) -> list[dict]:
    """Node rows, averaged per bin and node; `staleness_each` lists every staleness of the
    node's counted updates in the bin ("1,0,2"; None without any), so a histogram of single
    updates stays exact at any stride."""
    return _rows(db, """
        SELECT MAX(iteration) AS iteration, node, AVG(bits_up) AS bits_up,
               AVG(bits_down) AS bits_down, AVG(compute_s) AS compute_s,
               MAX(left_out) AS left_out, AVG(radio_j) AS radio_j, AVG(compute_j) AS compute_j,
               AVG(energy_j) AS energy_j, SUM(energy_j) AS energy_j_sum,
               AVG(staleness) AS staleness, GROUP_CONCAT(staleness) AS staleness_each, COUNT(*) AS n
        FROM node_iterations WHERE run_id=? AND iteration > ? AND iteration <= ?
        GROUP BY iteration / ?, node ORDER BY 1, node""", (run_id, after, upto, stride))


def links(db: sqlite3.Connection, run_id: int, after: int, upto: int, stride: int) -> list[dict]:
    """Link rows, averaged per bin, with the virtual time at the end of the bin's last one."""
    # The bins first, then one look-up of each bin's last iteration (not a join of every row).
    return _rows(db, """
        SELECT b.iteration, b.src, b.dst, i.virtual_time_s, b.bytes, b.packets, b.lost,
               b.retransmitted, b.busy_s, b.snr_db, b.collisions, b.retries, b.n
        FROM (SELECT MAX(iteration) AS iteration, src, dst, AVG(bytes) AS bytes,
                     AVG(packets) AS packets, AVG(lost) AS lost,
                     AVG(retransmitted) AS retransmitted, AVG(busy_s) AS busy_s,
                     AVG(snr_db) AS snr_db, AVG(collisions) AS collisions,
                     AVG(retries) AS retries, COUNT(*) AS n
              FROM links WHERE run_id=? AND iteration > ? AND iteration <= ?
              GROUP BY iteration / ?, src, dst) b
        LEFT JOIN iterations i ON i.run_id = ? AND i.iteration = b.iteration
        ORDER BY 1, 2, 3""", (run_id, after, upto, stride, run_id))


def newest_run_id(db: sqlite3.Connection, method: str) -> int | None:
    """The newest run of a compression method (e.g. the fp32 baseline "none"), or None."""
    return db.execute("SELECT MAX(id) FROM runs WHERE method=?", (method,)).fetchone()[0]


def energy_to(db: sqlite3.Connection, run_id: int, iteration: int) -> float | None:
    """Joules of every worker of a run up to and including `iteration` (None: not recorded)."""
    return db.execute("SELECT SUM(energy_j) FROM iterations WHERE run_id=? AND iteration <= ?",
                      (run_id, iteration)).fetchone()[0]
