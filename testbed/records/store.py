"""SQLite metrics store: one file, many runs, WAL mode so readers never block the writer.

Tables: runs, sweeps, iterations, node_iterations, links, evals, events, controls. The schema is
declared once, in testbed/records/columns.py: every column's SQL type, unit and meaning, and
whether it was added after stores were first written. The DDL (`SCHEMA`), the migration
(`ADDED_COLUMNS`) and the column lists below are made from it, as is the store's reference page
(docs/reference/store.md).

A run's status is running | completed | failed | stopped | pruned (`testbed tune`'s pruner ended
it: testbed.errors.Pruned); `sweep`/`sweep_params` are written by `testbed sweep` (`set_sweep`,
`import_run`), and `sweep_key` (a row of `sweeps`) is what a rerun of the same sweep command reads
to skip the points that completed. A `testbed tune` study is a sweep whose points its sampler
picks: `sweep` is the study's name, `sweep_params` the trial's parameters and `trial` its number.

Stores made before a column existed (`ADDED_COLUMNS`) gain it when opened for writing; a
read-only open reads its default. The sweep columns migrate once, on that write-open: the old
runs named `BASE[key=value,...]` (how `testbed sweep` named its runs before the column) get
their membership from the name (`sweep_from_name`); a read-only open of such a store sees no
sweep. Nothing else parses run names.

Writes are buffered and committed in one transaction per `flush()`, so a crash loses at most
the last unflushed batch and never leaves a half-written one. A run still `running` whose
writer process is gone is marked `failed` the next time a store is opened.
"""
from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from testbed.errors import UserError
from testbed.processes.lifeline import alive
from testbed.processes.signals import stops_deferred
from testbed.records.columns import COLUMNS, added_columns, column_names, schema_sql

# The schema is declared once, in testbed/records/columns.py: all of this is made from it.
SCHEMA = schema_sql()
# Columns added to a table after stores were first written: a store made before gets them
# (their default, else NULL, in its old rows) when it is opened for writing; a read-only open
# of such a store reads the default instead.
ADDED_COLUMNS = added_columns()
ITERATION_COLUMNS = column_names("iterations")
NODE_COLUMNS = column_names("node_iterations")
LINK_COLUMNS = column_names("links")
LINK_DEFAULTS = {"collisions": 0, "retries": 0}    # what a link row without them records
EVAL_COLUMNS = column_names("evals")
SUMMARY_COLUMNS = column_names("runs", "summary")
ALLOWED_STORE = ("a SQLite store written by testbed, or a new file name, in a folder this user "
                 "can write")
TABLES = set(COLUMNS)
RUN_TABLES = ("iterations", "node_iterations", "links", "evals", "events", "controls")  # by run_id
RUN_COLUMNS = column_names("runs", "")
SWEEP_COLUMNS = column_names("runs", "sweep")
# How `testbed sweep` named its runs before the sweep columns: read once, by the migration.
OLD_SWEEP_NAME = re.compile(r"^(?P<base>.+)\[(?P<label>[^\[\]]+)\]$")


def sweep_from_name(name: str | None) -> tuple[str, dict[str, str]] | None:
    """(base, {key: value}) of a run named `BASE[key=value,...]`, or None for any other name
    (the migration of stores made before the sweep columns)."""
    m = OLD_SWEEP_NAME.match(name or "")
    if not m:
        return None
    params = {}
    for part in m["label"].split(","):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            return None
        params[key.strip()] = value.strip()
    return m["base"], params


class RunNotFound(UserError, LookupError):
    """No run of that name or id in the store (the message names both)."""


class StoreError(UserError):
    """`--store PATH` is not a store testbed can use; one line naming the path, what it is and
    what is allowed. Raised before anything is written."""

    def __init__(self, path: Path, what: str, allowed: str = ALLOWED_STORE):
        super().__init__(f"--store {path}: {what}; allowed: {allowed}")
        self.path = path


def _pid_alive(pid: int | None) -> bool:
    """A run's writer is alive (a zombie, exited but not reaped, is not)."""
    return bool(pid) and alive(pid)


def _decode_sweep(run: dict) -> dict:
    if run.get("sweep_params") is not None:
        run["sweep_params"] = json.loads(run["sweep_params"])
    return run


class Store:
    """One SQLite file. Safe to open from several processes (one writer per run)."""

    def __init__(self, path: str | os.PathLike, *, readonly: bool = False, create: bool = True):
        """Open (and with `create`, make) the store; a path that is no usable store raises
        StoreError before anything is written to it."""
        self.path = Path(path)
        self.readonly = readonly
        if (readonly or not create) and not self.path.exists():
            raise self._explain(FileNotFoundError(str(self.path)))
        self.db = None
        try:
            self._open()
        except (sqlite3.Error, OSError) as e:
            if self.db is not None:
                self.db.close()
            raise self._explain(e) from None
        # a read-only open of an older store reads its missing columns as their default
        self._missing = {(table, name): kind.split()[-1] if "DEFAULT" in kind else "NULL"
                         for table, name, kind in self._missing_columns()}
        self.db.row_factory = sqlite3.Row
        self._pending: list[tuple[str, Iterable[tuple]]] = []
        self._summary: dict[int, dict] = {}   # run -> what the queued rows add to its summary

    def _open(self) -> None:
        if self.path.is_dir():
            raise IsADirectoryError(str(self.path))
        if self.readonly:
            uri = f"file:{self.path.resolve()}?mode=ro"
            self.db = sqlite3.connect(uri, uri=True, timeout=30, check_same_thread=False)
            self._check_schema()
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(self.path), timeout=30, check_same_thread=False)
        self._check_schema()  # reads only: a foreign database is refused before any write
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)
        self._add_missing_columns()
        self.db.commit()
        self.mark_dead_runs()

    def _check_schema(self) -> None:
        tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        tables.discard("sqlite_sequence")
        if not tables:
            return  # a new store
        if not tables & TABLES:  # an older store may lack some of them: they are added
            raise sqlite3.DatabaseError(f"foreign database: tables {', '.join(sorted(tables))}")
        if "runs" not in tables:
            return
        columns = {r[1] for r in self.db.execute("PRAGMA table_info(runs)")}
        missing = [c for c in RUN_COLUMNS if c not in columns]
        if missing:
            raise sqlite3.DatabaseError(f"foreign database: its runs table lacks {', '.join(missing)}")

    def _explain(self, e: Exception) -> StoreError:
        """What is wrong with the path, from what SQLite or the OS said."""
        text = str(e)
        parent = next((p for p in self.path.parents if p.exists()), None)
        if isinstance(e, IsADirectoryError) or self.path.is_dir():
            return StoreError(self.path, "is a directory")
        if isinstance(e, (NotADirectoryError, FileExistsError)) or (parent and not parent.is_dir()):
            return StoreError(self.path, f"{parent} is a file, not a folder")
        if isinstance(e, FileNotFoundError):
            return StoreError(self.path, "no such file", "an existing store (make one with "
                              "`testbed run FILE --store PATH`)")
        if text.startswith("foreign database"):
            return StoreError(self.path, f"a SQLite database of another program ({text.split(': ', 1)[1]})")
        if "file is not a database" in text or "malformed" in text:
            size = self.path.stat().st_size if self.path.exists() else 0
            return StoreError(self.path, f"not a SQLite database ({size} bytes: {text})")
        if "readonly" in text or "read-only" in text or isinstance(e, PermissionError) or (
                "unable to open" in text and not os.access(self.path.parent, os.W_OK)):
            return StoreError(self.path, "cannot be written (read-only file or folder)")
        if "locked" in text:
            return StoreError(self.path, "locked by another process for over 30 s",
                              "a store no other process holds a write lock on")
        return StoreError(self.path, f"cannot be opened ({type(e).__name__}: {text})")

    # ---------------------------------------------------------------- lifecycle
    def close(self) -> None:
        if not self.readonly:
            self.flush()
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _missing_columns(self) -> list[tuple[str, str, str]]:
        out = []
        for table, columns in ADDED_COLUMNS.items():
            have = {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}
            out += [(table, name, kind) for name, kind in columns.items() if name not in have]
        return out

    def _add_missing_columns(self) -> None:
        missing = self._missing_columns()
        for table, name, kind in missing:
            self.db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
        if ("runs", "sweep", "TEXT") in missing:
            self._migrate_sweep_names()

    def _migrate_sweep_names(self) -> None:
        """Sweep membership of the runs of a store made before the sweep columns, from their
        names (once: the column is added in the same transaction)."""
        for run_id, name in self.db.execute("SELECT id, name FROM runs").fetchall():
            found = sweep_from_name(name)
            if found:
                self.db.execute("UPDATE runs SET sweep=?, sweep_params=? WHERE id=?",
                                (found[0], json.dumps(found[1]), run_id))

    def mark_dead_runs(self) -> list[int]:
        """Runs left `running` by a process that no longer exists were killed: say so."""
        host = os.uname().nodename
        dead = [r[0] for r in self.db.execute(
            "SELECT id, pid, host FROM runs WHERE status = 'running'").fetchall()
            if (r[2] in (None, host)) and not _pid_alive(r[1])]
        for run_id in dead:
            self.db.execute(
                "UPDATE runs SET status='failed', ended_at=?, error=COALESCE(error, ?) WHERE id=?",
                (time.time(), "the run's process ended without finishing (killed or crashed)", run_id))
        self.db.commit()
        return dead

    # ---------------------------------------------------------------- writing
    def create_run(self, name: str, config: dict, *, method: str | None = None,
                   topology: str | None = None, workers: int | None = None,
                   bandwidth_mbps: float | None = None, graph: dict | None = None,
                   pid: int | None = None) -> int:
        cur = self.db.execute(
            "INSERT INTO runs (name, method, topology, workers, bandwidth_mbps, status, "
            "config_json, graph_json, started_at, pid, host) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (name, method, topology, workers, bandwidth_mbps, "running",
             json.dumps(config, sort_keys=True, default=str),
             json.dumps(graph) if graph is not None else None, time.time(),
             os.getpid() if pid is None else pid, os.uname().nodename))
        self.db.commit()
        return int(cur.lastrowid)

    def _queue(self, sql: str, rows: list[tuple]) -> None:
        if rows:
            self._pending.append((sql, rows))

    def _summarise(self, run_id: int, **values) -> None:
        """Fold queued rows into the run's summary (bits add up; the rest keep their max)."""
        s = self._summary.setdefault(run_id, {"bits": 0, "energy": None, "it": None, "vt": None, "acc": None})
        for key, value in values.items():
            if value is None:
                continue
            if key == "energy":
                s[key] = value if s[key] is None else s[key] + value
            else:
                s[key] = s[key] + value if key == "bits" else max(value, value if s[key] is None else s[key])

    def append_iteration(self, run_id: int, row: dict, nodes: list[dict] = (),
                         links: list[dict] = ()) -> None:
        self._summarise(run_id, bits=(row.get("bits_up") or 0) + (row.get("bits_down") or 0),
                        energy=row.get("energy_j"), it=row.get("iteration"),
                        vt=row.get("virtual_time_s"))
        self._queue(f"INSERT INTO iterations (run_id, {', '.join(ITERATION_COLUMNS)}) VALUES "
                    f"({', '.join('?' * (len(ITERATION_COLUMNS) + 1))})",
                    [(run_id, *[row.get(c) for c in ITERATION_COLUMNS])])
        self._queue(f"INSERT INTO node_iterations (run_id, {', '.join(NODE_COLUMNS)}) VALUES "
                    f"({', '.join('?' * (len(NODE_COLUMNS) + 1))})",
                    [(run_id, *[n.get(c) for c in NODE_COLUMNS]) for n in nodes])
        self._queue(f"INSERT INTO links (run_id, {', '.join(LINK_COLUMNS)}) VALUES "
                    f"({', '.join('?' * (len(LINK_COLUMNS) + 1))})",
                    [(run_id, *[l.get(c, LINK_DEFAULTS.get(c)) for c in LINK_COLUMNS]) for l in links])

    def append_eval(self, run_id: int, row: dict) -> None:
        self._summarise(run_id, acc=row.get("test_accuracy"))
        self._queue(f"INSERT INTO evals (run_id, {', '.join(EVAL_COLUMNS)}) VALUES "
                    f"({', '.join('?' * (len(EVAL_COLUMNS) + 1))})",
                    [(run_id, *[row.get(c) for c in EVAL_COLUMNS])])

    def append_event(self, run_id: int, kind: str, detail: dict | None = None, *,
                     iteration: int | None = None, virtual_time_s: float | None = None) -> None:
        self._queue("INSERT INTO events (run_id, iteration, virtual_time_s, kind, detail_json) "
                    "VALUES (?,?,?,?,?)",
                    [(run_id, iteration, virtual_time_s, kind,
                      json.dumps(detail or {}, sort_keys=True, default=str))])

    def flush(self) -> None:
        """Commit every queued row in one transaction (all or nothing)."""
        if not self._pending:
            return
        with stops_deferred():  # committed once and cleared once, whatever signal comes
            with self.db:
                for sql, rows in self._pending:
                    self.db.executemany(sql, rows)
                for run_id, s in self._summary.items():
                    sets, args = ["total_bits = total_bits + ?"], [s["bits"]]
                    if s["energy"] is not None:
                        sets.append("energy_j = COALESCE(energy_j, 0) + ?")
                        args.append(s["energy"])
                    for col, key in (("last_iteration", "it"), ("virtual_time_s", "vt"),
                                     ("best_accuracy", "acc")):
                        if s[key] is not None:  # SQLite's MAX(a, NULL) is NULL: skip the unknown
                            sets.append(f"{col} = MAX(COALESCE({col}, ?), ?)")
                            args += [s[key], s[key]]
                    self.db.execute(f"UPDATE runs SET {', '.join(sets)} WHERE id = ?", (*args, run_id))
            self._pending.clear()
            self._summary.clear()

    def finish_run(self, run_id: int, status: str, error: str | None = None) -> None:
        self.flush()
        with self.db:
            self.db.execute("UPDATE runs SET status=?, ended_at=?, error=? WHERE id=?",
                            (status, time.time(), error, run_id))

    def rewind_run(self, run_id: int, iteration: int) -> None:
        """Make run `run_id` running again in this process from after `iteration` (a resume):
        its rows of later iterations go (the resumed run writes them again) and its summary
        columns are recomputed from the rows that stay, in one transaction."""
        self.flush()
        with stops_deferred(), self.db:
            for table in ("iterations", "node_iterations", "links", "evals", "events"):
                self.db.execute(f"DELETE FROM {table} WHERE run_id=? AND iteration > ?",
                                (run_id, iteration))
            self.db.execute(
                "UPDATE runs SET status='running', ended_at=NULL, error=NULL, pid=?, host=?, "
                "last_iteration=(SELECT MAX(iteration) FROM iterations WHERE run_id=:id), "
                "virtual_time_s=(SELECT virtual_time_s FROM iterations WHERE run_id=:id "
                "ORDER BY iteration DESC LIMIT 1), "
                "total_bits=(SELECT COALESCE(SUM(bits_up + bits_down), 0) FROM iterations "
                "WHERE run_id=:id), "
                "best_accuracy=(SELECT MAX(test_accuracy) FROM evals WHERE run_id=:id), "
                "energy_j=(SELECT SUM(energy_j) FROM iterations WHERE run_id=:id) "
                "WHERE id=:id".replace("?, host=?", ":pid, host=:host"),
                {"id": run_id, "pid": os.getpid(), "host": os.uname().nodename})

    def set_sweep(self, run_id: int, sweep: str, params: dict, trial: int | None = None) -> None:
        """Record that run `run_id` is the member of sweep `sweep` at grid values `params`
        (with `trial`: that trial of tune study `sweep`)."""
        with self.db:
            self.db.execute("UPDATE runs SET sweep=?, sweep_params=?, trial=? WHERE id=?",
                            (sweep, json.dumps(params), trial, run_id))

    def import_run(self, path: str | os.PathLike, *, sweep: str | None = None,
                   params: dict | None = None, sweep_key: str | None = None,
                   trial: int | None = None) -> int:
        """Copy the one run of the store at `path` (a sweep point's own store, written by a
        process that has ended) into this one with all its rows, in one transaction; its id
        here is new (rows, events and controls follow it). With `sweep`, it is that sweep's
        member at `params` (and with `trial`, that tune study's trial); an earlier run of the
        same `sweep_key` and name that did not complete stops being one (this run replaces it).
        A run still `running` there is recorded as failed: its process ended without
        finishing. Returns the new id."""
        Store(path).close()  # the source gains any missing column; a dead writer's run: failed
        self.flush()
        self.db.execute("ATTACH DATABASE ? AS src", (str(path),))
        try:
            src_ids = [r[0] for r in self.db.execute("SELECT id FROM src.runs")]
            if len(src_ids) != 1:
                raise RunNotFound(f"store {path} holds {len(src_ids)} runs; a sweep point's "
                                  "store holds one")
            with stops_deferred(), self.db:
                cols = self._shared_columns("runs", exclude={"id"})
                cur = self.db.execute(f"INSERT INTO main.runs ({cols}) SELECT {cols} FROM src.runs")
                new_id = int(cur.lastrowid)
                for table in RUN_TABLES:
                    cols = self._shared_columns(table, exclude={"id", "run_id"})
                    order = "id" if table in ("events", "controls") else "rowid"
                    self.db.execute(f"INSERT INTO main.{table} (run_id, {cols}) SELECT ?, {cols} "
                                    f"FROM src.{table} ORDER BY {order}", (new_id,))
                self.db.execute(
                    "UPDATE runs SET status='failed', ended_at=COALESCE(ended_at, ?), "
                    "error=COALESCE(error, ?) WHERE id=? AND status='running'",
                    (time.time(), "the run's process ended without finishing (killed or crashed)",
                     new_id))
                if sweep is not None:
                    if sweep_key is not None:
                        self.db.execute(
                            "UPDATE runs SET sweep=NULL, sweep_params=NULL, sweep_key=NULL, "
                            "trial=NULL WHERE sweep_key=? AND name=(SELECT name FROM runs "
                            "WHERE id=?) AND status != 'completed'", (sweep_key, new_id))
                    self.db.execute("UPDATE runs SET sweep=?, sweep_params=?, sweep_key=?, "
                                    "trial=? WHERE id=?", (sweep, json.dumps(params or {}),
                                                           sweep_key, trial, new_id))
        finally:
            self.db.execute("DETACH DATABASE src")
        return new_id

    def _shared_columns(self, table: str, exclude: set[str]) -> str:
        """The columns of `table` that this store and the attached `src` both have."""
        here = [r[1] for r in self.db.execute(f"PRAGMA main.table_info({table})")]
        there = {r[1] for r in self.db.execute(f"PRAGMA src.table_info({table})")}
        return ", ".join(c for c in here if c in there and c not in exclude)

    def record_sweep(self, key: str, name: str, spec: dict) -> None:
        """Remember sweep `key` (its command: file, grid, overrides, seeds) the first time."""
        with self.db:
            self.db.execute("INSERT OR IGNORE INTO sweeps (key, name, spec_json, created_at) "
                            "VALUES (?,?,?,?)", (key, name, json.dumps(spec, sort_keys=True),
                                                 time.time()))

    def sweep_specs(self) -> dict[str, dict]:
        """Every sweep and tune study recorded: {key: {"name", "spec", "created_at"}}."""
        try:
            rows = self.db.execute("SELECT key, name, spec_json, created_at FROM sweeps "
                                   "ORDER BY created_at, key").fetchall()
        except sqlite3.OperationalError:   # a read-only open of a store made before the table
            return {}
        return {r["key"]: {"name": r["name"], "spec": json.loads(r["spec_json"]),
                           "created_at": r["created_at"]} for r in rows}

    def sweep_members(self, key: str) -> dict[str, dict]:
        """The runs that are members of sweep `key`, by name: {name: {id, status}}."""
        if ("runs", "sweep_key") in self._missing:
            return {}
        rows = self.db.execute("SELECT id, name, status FROM runs WHERE sweep_key=? ORDER BY id",
                               (key,)).fetchall()
        return {r["name"]: {"id": r["id"], "status": r["status"]} for r in rows}

    def set_graph(self, run_id: int, graph: dict) -> None:
        """The run's topology JSON after steering changed its links."""
        with self.db:
            self.db.execute("UPDATE runs SET graph_json=? WHERE id=?", (json.dumps(graph), run_id))

    # ---------------------------------------------------------------- controls
    def request_control(self, run_id: int, target: str, changes: dict) -> int:
        with self.db:
            cur = self.db.execute(
                "INSERT INTO controls (run_id, created_at, target, changes_json) VALUES (?,?,?,?)",
                (run_id, time.time(), target, json.dumps(changes, sort_keys=True)))
        return int(cur.lastrowid)

    def pending_controls(self, run_id: int) -> list[dict]:
        rows = self.db.execute(
            "SELECT id, target, changes_json, created_at FROM controls "
            "WHERE run_id=? AND status='pending' ORDER BY id", (run_id,)).fetchall()
        return [{"id": r["id"], "target": r["target"], "changes": json.loads(r["changes_json"]),
                 "created_at": r["created_at"]} for r in rows]

    def resolve_control(self, control_id: int, status: str, iteration: int | None,
                        message: str = "") -> None:
        with self.db:
            self.db.execute("UPDATE controls SET status=?, applied_iteration=?, message=? WHERE id=?",
                            (status, iteration, message, control_id))

    def controls(self, run_id: int) -> list[dict]:
        rows = self.db.execute("SELECT * FROM controls WHERE run_id=? ORDER BY id", (run_id,))
        return [dict(r) | {"changes": json.loads(r["changes_json"])} for r in rows]

    # ---------------------------------------------------------------- reading
    def runs(self) -> list[dict]:
        """All runs with summary columns the run table shows, and their sweep membership."""
        cols = [f"{self._missing[('runs', c)]} AS {c}" if ("runs", c) in self._missing else c
                for c in RUN_COLUMNS + SUMMARY_COLUMNS + SWEEP_COLUMNS]
        rows = self.db.execute(f"SELECT {', '.join(cols)} FROM runs ORDER BY id").fetchall()
        return [_decode_sweep(dict(r)) for r in rows]

    def run(self, ref: int | str) -> dict:
        """A run by id, or by name (the newest run of that name)."""
        row = None
        if isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
            row = self.db.execute("SELECT * FROM runs WHERE id=?", (int(ref),)).fetchone()
        if row is None:
            row = self.db.execute("SELECT * FROM runs WHERE name=? ORDER BY id DESC LIMIT 1",
                                  (str(ref),)).fetchone()
        if row is None:
            raise RunNotFound(f"no run {ref!r} in store {self.path}")
        out = _decode_sweep(dict(row))
        out["config"] = json.loads(out.pop("config_json"))
        graph = out.pop("graph_json")
        out["graph"] = json.loads(graph) if graph else None
        return out

    def _rows(self, table: str, columns: list[str], run_id: int, after: int | None,
              order: str = "iteration") -> list[dict]:
        cols = [f"{self._missing[(table, c)]} AS {c}" if (table, c) in self._missing else c for c in columns]
        sql = f"SELECT {', '.join(cols)} FROM {table} WHERE run_id=?"
        args: list[Any] = [run_id]
        if after is not None:
            sql += " AND iteration > ?"
            args.append(after)
        rows = self.db.execute(sql + f" ORDER BY {order}", args).fetchall()
        return [dict(r) for r in rows]

    def iterations(self, run_id: int, after: int | None = None) -> list[dict]:
        return self._rows("iterations", ITERATION_COLUMNS, run_id, after)

    def node_iterations(self, run_id: int, after: int | None = None) -> list[dict]:
        return self._rows("node_iterations", NODE_COLUMNS, run_id, after, "iteration, node")

    def links(self, run_id: int, after: int | None = None) -> list[dict]:
        return self._rows("links", LINK_COLUMNS, run_id, after, "iteration, src, dst")

    def evals(self, run_id: int, after: int | None = None) -> list[dict]:
        return self._rows("evals", EVAL_COLUMNS, run_id, after)

    def events(self, run_id: int, after: int | None = None) -> list[dict]:
        rows = self._rows("events", ["id", "iteration", "virtual_time_s", "kind", "detail_json"],
                          run_id, after, "id")
        for r in rows:
            r["detail"] = json.loads(r.pop("detail_json") or "{}")
        return rows

    def export(self, ref: int | str) -> dict:
        """The stable public JSON shape (`testbed export --format json`)."""
        run = self.run(ref)
        rid = run["id"]
        return {
            "run": {"id": rid, "name": run["name"], "status": run["status"],
                    "config": run["config"], "method": run["method"],
                    "topology": run["topology"], "workers": run["workers"],
                    "started_at": run["started_at"], "ended_at": run["ended_at"],
                    "error": run["error"], "energy_j": run.get("energy_j")},
            "iterations": self.iterations(rid),
            "nodes": self.node_iterations(rid),
            "evals": self.evals(rid),
            "links": self.links(rid),
            "events": self.events(rid),
            "controls": self.controls(rid),
        }
