"""The testbed from Python (scripts, notebooks): what `testbed run` does, as calls.

    from testbed import api

    cfg = api.load("experiments/quickstart.toml", {"run.iterations": 50})   # or a dict of tables
    run = api.run(cfg, store="runs.db")            # model=nn.Module, dataset=... optional
    run.id, run.status                             # the run in the store
    run.rows("evals")                              # list of dicts, as `testbed export` has them
    run.column("evals", "test_accuracy")           # one column as a numpy array
    run.export()                                   # the whole run, `testbed export --format json`'s dict

`load` takes an experiment file, a dict of its tables or a loaded config, and overrides as
`--set` strings or a dict {"key.path": value}; mistakes raise the CLI's ConfigError (one line).
`run` runs in this process (or under torchrun for a file, `launcher="torchrun"`), writes the
store as `testbed run` does and returns a `Run`; `open_run(store, name_or_id)` gets an earlier
one. `testbed run` is this module's `load` and `run_spec` with a progress bar.

A model object (`model=`) is trained in place; a data set object (`dataset=`) is what a loader
returns (a dict with "train", "test", "num_classes", or a nodes.data.Dataset) or a loader
function. Their stored configuration names them `"<given>:Type"`: such a run cannot be resumed
from another process.
"""
from __future__ import annotations

import contextlib
import copy
import json
import math
import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from channels.errors import DeliveryError
from lgc_schema import OptionError
from nodes.plugins import give
from testbed.configuration.loading import config_from_raw, load_config, set_keys
from testbed.configuration.schema import ExperimentConfig
from testbed.distributed.launcher import launch_torchrun
from testbed.errors import (
    ConfigError,
    ExperimentError,
    RunFailed,
    SetupError,
    TransportError,
    UserError,
)
from testbed.records.progress import (
    control_reporter,
    progress_printer,
    summary_line,
    unit_of,
)
from testbed.emulation.timing import Timer, timed
from testbed.records.store import Store
from testbed.records.summary import public_export, write_csv
from testbed.records.timed_store import TimedStore
from testbed.run import checkpoint
from testbed.runspec import RunSpec

TABLES = ("iterations", "evals", "nodes", "links", "events", "controls")


# ------------------------------------------------------------------------ configurations
def load(source: str | Path | dict | ExperimentConfig,
         overrides: list[str] | tuple[str, ...] | dict[str, Any] = (), *,
         name: str | None = None, base: str | Path = ".") -> ExperimentConfig:
    """A validated experiment configuration.

    Args:
        source: an experiment file (TOML), a dict of its tables ({"run": {...}, ...}) or an
            already loaded configuration (copied, the overrides applied).
        overrides: `--set` strings (["network.link.bandwidth_mbps=5"]) or a dict
            {"network.link.bandwidth_mbps": 5}.
        name: the run's name (run.name).
        base: where a dict's relative file names are looked up after the working directory.

    Returns:
        The configuration, every key checked and every default filled in.

    Raises:
        ConfigError: a mistake in the file or an override (one line: key, value, what is allowed).
    """
    sets = as_overrides(overrides)
    if name:
        sets.append(f"run.name={toml_literal(name)}")
    if isinstance(source, ExperimentConfig):
        if not sets:
            return copy.deepcopy(source)
        return config_from_raw(_stored(source), sets, base=base, source=source.source)
    if isinstance(source, dict):
        return config_from_raw(source, sets, base=base, source="<dict>")
    if isinstance(source, (str, Path)):
        return load_config(source, sets)
    raise ConfigError("source", type(source).__name__,
                      "an experiment file path, a dict of tables or an ExperimentConfig")


def _stored(cfg: ExperimentConfig) -> dict:
    """A configuration as the file it came from would hold it.

    Returns:
        Its tables as a dict, the keys the file did not set left out.
    """
    return set_keys(copy.deepcopy(cfg.as_dict()))


def as_overrides(overrides) -> list[str]:
    """Overrides in the one form `load` applies them in.

    Args:
        overrides: `--set` strings, one such string, or a dict {"key.path": value}.

    Returns:
        The `--set KEY=VALUE` strings, values written as TOML literals.
    """
    if isinstance(overrides, dict):
        return [f"{k}={toml_literal(v)}" for k, v in overrides.items()]
    if isinstance(overrides, str):
        return [overrides]
    return list(overrides or ())


def toml_literal(value: Any) -> str:
    """One value of an override as `--set KEY=VALUE` writes it.

    Args:
        value: a string, path, number, boolean, list, tuple or dict (nested as TOML allows).

    Returns:
        The TOML literal; infinities and NaN as TOML spells them.

    Raises:
        ConfigError: a value TOML cannot hold.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            return {math.inf: "inf", -math.inf: "-inf"}.get(value, "nan")
        return repr(value)
    if isinstance(value, (str, Path)):
        return json.dumps(str(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_literal(v)}"
                               for k, v in value.items()) + "}"
    raise ConfigError("overrides", value, "a string, number, boolean, list or dict")


# ------------------------------------------------------------------------ runs
@dataclass(frozen=True)
class Run:
    """One run of a store: its id and name, and its rows read from the store when asked.

    Attributes:
        store: the store's path.
        id: the run's id in the store.
        name: the run's name.
    """
    store: str
    id: int
    name: str

    def _read(self, fn):
        with Store(self.store, readonly=True) as s:
            return fn(s)

    @property
    def status(self) -> str:
        """running, completed, failed, stopped or pruned (`testbed tune`)."""
        return self._read(lambda s: s.run(self.id)["status"])

    @property
    def config(self) -> dict:
        """The validated experiment configuration the run was made with, as stored."""
        return self._read(lambda s: s.run(self.id)["config"])

    def rows(self, table: str = "iterations") -> list[dict]:
        """One table's rows, as `testbed export` writes them.

        Args:
            table: one of `TABLES` ("nodes" is the store's node_iterations).

        Returns:
            One dict per row, column name to value (docs/reference/store.md has the columns).
        """
        if table not in TABLES:
            raise UserError(f"table = {table!r}: must be one of {', '.join(TABLES)}")
        read = "node_iterations" if table == "nodes" else table
        return self._read(lambda s: getattr(s, read)(self.id))

    def column(self, table: str, key: str) -> np.ndarray:
        """One column of a table as an array.

        Args:
            table: one of `TABLES`.
            key: a column of that table, e.g. "test_accuracy" of "evals".

        Returns:
            A numpy array, NaN where a row has no value.
        """
        rows = self.rows(table)
        if rows and key not in rows[0]:
            raise UserError(f"column = {key!r}: not in {table}; allowed: {', '.join(rows[0])}")
        return np.array([np.nan if r[key] is None else r[key] for r in rows])

    def export(self) -> dict:
        """The run and all its rows.

        Returns:
            The dict `testbed export --format json` prints: {"run", "iterations", "evals",
            "links", "events", ...}.
        """
        return self._read(lambda s: public_export(s, self.id))

    def to_json(self, path: str | Path) -> Path:
        """Write the run and all its rows (`export()`) to a JSON file.

        Args:
            path: the file to write (replaced if it exists).

        Returns:
            The file's path.
        """
        Path(path).write_text(json.dumps(self.export(), indent=1, default=str))
        return Path(path)

    def to_csv(self, folder: str | Path) -> list[Path]:
        """Write one CSV file per table into `folder` (`testbed export --format csv`).

        Args:
            folder: where the files go (created if missing).

        Returns:
            The files written.
        """
        return write_csv(self.export(), Path(folder))


def open_run(store: str | Path, ref: int | str) -> Run:
    """A run of an existing store.

    Args:
        store: the store's path.
        ref: the run's id, or its name (the newest run of that name).

    Returns:
        The run.

    Raises:
        UserError: no such store or run.
    """
    with Store(str(store), create=False, readonly=True) as s:
        run = s.run(ref)
    return Run(str(store), int(run["id"]), run["name"])


def run(source: str | Path | dict | ExperimentConfig, *, store: str | Path = "runs.db",
        overrides: list[str] | tuple[str, ...] | dict[str, Any] = (), name: str | None = None,
        model=None, dataset=None, launcher: str = "local", nproc: int | None = None,
        quiet: bool = True) -> Run:
    """Run an experiment into a store, as `testbed run` does.

    Args:
        source: an experiment file, a dict of its tables or a configuration from `load`.
        store: the SQLite store the run is written to (created if missing).
        overrides: `--set` strings or a dict {"key.path": value}, applied after the source.
        name: the run's name (default: run.name, else the file's stem).
        model (torch.nn.Module | None): a model to train in place of model.name (trained in
            place).
        dataset (dict | nodes.data.Dataset | Callable | None): what a loader returns ({"train",
            "test", "num_classes"}) or a loader function, in place of data.dataset.
        launcher: "local" (every worker in this process) or "torchrun" (one process per
            worker; needs a file, no model or dataset object).
        nproc: with torchrun, processes per host.
        quiet: no progress bar.

    Returns:
        The run, once it has ended (its status says how).

    Raises:
        UserError: a mistake of the caller's (one line; nothing is written).
        RunFailed: the run failed for a reason it names (the store holds it, marked failed).
    """
    if launcher not in ("local", "torchrun"):
        raise UserError(f"launcher = {launcher!r}: must be 'local' or 'torchrun'")
    store = str(store)
    if launcher == "torchrun":
        if not isinstance(source, (str, Path)) or model is not None or dataset is not None:
            raise UserError("launcher = 'torchrun': every rank loads the experiment from a file; "
                            "expected an experiment file path and no model or dataset object")
        spec = RunSpec(store=store, file=str(source), overrides=tuple(as_overrides(overrides)),
                       name=name, launcher="torchrun", nproc=nproc, quiet=quiet)
        run_spec(spec)
        return open_run(store, name or load(source, overrides).run.name)
    cfg = load(source, overrides, name=name)
    if model is not None:
        from torch import nn

        if not isinstance(model, nn.Module):
            raise UserError(f"model = {type(model).__name__}: must be a torch.nn.Module")
        cfg.model.name, cfg.model.options = give(model), {}
    if dataset is not None:
        cfg.data.dataset = give(dataset)
        if not callable(dataset):
            cfg.data.options, cfg.data.root = {}, None
    with opened_store(store) as st:
        exp = build_experiment(cfg, st)
        run_id = execute(exp, store, quiet=quiet)
    return Run(store, run_id, cfg.run.name)


def run_spec(spec: RunSpec, watch=None, timer: Timer | None = None) -> int:
    """Run what a `testbed run` command line asks for, and print its summary line.

    Args:
        spec: the file, overrides, store and launcher of the command.
        watch: called with each round's `testbed.run.loop.Progress` (in this process only;
            `testbed tune`'s pruner: raising `testbed.errors.Pruned` there ends the run
            `pruned`).
        timer: called as `timer(what, wall_s, iteration)` with the wall seconds of the loop's
            pieces (compute, compression, emulation, eval), the store's writes ("store"),
            building the experiment ("setup") and the loop ("run"), e.g. a
            `testbed.run.wall_split.WallSplit` (in this process only).

    Returns:
        The command's exit code (0; a failure raises).
    """
    cfg = load(spec.file, spec.overrides, name=spec.name)
    if spec.launcher == "torchrun":
        if watch is not None or timer is not None:
            raise UserError("launcher = 'torchrun': a progress callback or timer watches a run "
                            "in this process only; allowed: launcher = 'local'")
        return launch_torchrun(spec, cfg)
    with opened_store(spec.store, timer) as store:
        with timed(timer, "setup", -1):
            exp = build_experiment(cfg, store, timer)
        return run_experiment(exp, store, spec, watch, timer)


# ------------------------------------------------------------------------ the parts
def build_experiment(cfg: ExperimentConfig, store: Store, timer: Timer | None = None):
    """Set up the run `cfg` describes: data, model, workers, network and method.

    Args:
        cfg: a configuration from `load`.
        store: the open store the run will write to.
        timer: the loop's timer hook (see `run_spec`), or None.

    Returns:
        The `testbed.experiment.Experiment`, ready to run.

    Raises:
        SetupError: what the set-up refuses is the user's to fix (exit 2, one line).
    """
    # deferred: torch; the CLI's parser imports this module (resume)
    from testbed.experiment import Experiment

    try:
        return Experiment(cfg, store, timer=timer)
    except (ExperimentError, ValueError, FileNotFoundError) as e:
        raise SetupError(f"{cfg.source}: {e}") from e


def run_failures() -> tuple[type, ...]:
    """The errors with which a started run fails for a reason it names (exit 1, one line).

    Any other exception in a run is a bug and stays a traceback. An OptionError here is a
    setting the link layer finds it cannot carry only once the run sends (e.g. network.engine =
    "fast" for a multi-hop call over a fading link): the run was made, so it failed (exit 1).

    Returns:
        The exception classes, for an `except` clause.
    """
    # deferred: torch, GradientError's room; the CLI's parser imports this module
    from nodes.compression.base import GradientError

    return (ExperimentError, DeliveryError, GradientError, TransportError, OptionError)


@contextlib.contextmanager
def opened_store(path: str, timer: Timer | None = None):
    """Open a store for one run; a refused run leaves no trace.

    If the store did not exist and the block fails before a run began, the files made for it
    are removed again.

    Args:
        path: the store's file.
        timer: with one, the store reports its writes' wall seconds to it as "store".

    Yields:
        The open `Store` (closed after the block).
    """
    new = not Path(path).exists()
    store = Store(path) if timer is None else TimedStore(path, timer)
    try:
        yield store
    except BaseException:
        try:
            began = bool(store.db.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
            store.close()
        except sqlite3.Error:  # the store itself broke: leave it as it is for the user to see
            began = True
        if new and not began:
            for suffix in ("", "-wal", "-shm"):
                Path(path + suffix).unlink(missing_ok=True)
        raise
    store.close()


def execute(exp, store_path: str, *, quiet: bool = True, watch=None,
            timer: Timer | None = None) -> int:
    """Run a built experiment to its end.

    Ctrl-C or SIGTERM leaves the run stopped, its rows flushed. A completed (or pruned) run's
    checkpoints are removed (`testbed resume` refuses both).

    Args:
        exp: the experiment from `build_experiment`.
        store_path: its store's file (for messages and the checkpoints).
        quiet: no progress bar (the bar also says when a steering request took effect).
        watch: called after the bar with each round's `testbed.run.loop.Progress`.
        timer: told the loop's wall seconds as "run" (see `run_spec`), or None.

    Returns:
        The run's id in the store.

    Raises:
        RunFailed: the run failed for a reason it names (one line; the store marks it failed).
    """
    update, close_bar = progress_printer(exp.iterations, quiet, unit_of(exp.cfg))
    if update is not None:  # the terminal hears when a steering request took effect
        controls = control_reporter(exp.store, lambda: getattr(exp, "run_id", None))

        def progress(p, bar=update):
            bar(p)
            controls()

        def close():
            try:
                controls(force=True)
            except sqlite3.Error:  # the store itself failed: the run's own error says so
                pass
            close_bar()
        exp.progress = progress
    else:
        close = close_bar
    if watch is not None:   # the caller's watcher, after the bar
        exp.progress = _chained(exp.progress, watch)
    try:
        with timed(timer, "run", -1):
            run_id = exp.run()
    except KeyboardInterrupt:  # SIGINT or SIGTERM: the run is marked stopped, rows flushed
        close()
        print(f"run {exp.run_id} stopped; rows so far are in {store_path}", file=sys.stderr)
        raise
    except run_failures() as e:  # the run is already marked failed in the store
        close()
        raise RunFailed(f"run {exp.run_id} failed: {e}") from e
    except BaseException:
        close()
        raise
    close()
    if exp.store.run(run_id)["status"] in ("completed", "pruned"):
        checkpoint.remove_run(store_path, run_id)
    return run_id


def _chained(first, then):
    """Two progress functions as one.

    Returns:
        A function calling `first` (a bar; None: none), then `then`.
    """
    if first is None:
        return then

    def both(p):
        first(p)
        then(p)
    return both


def run_experiment(exp, store: Store, spec: RunSpec, watch=None, timer: Timer | None = None) -> int:
    """Run a built experiment as `testbed run` does: `execute`, then the summary line.

    Args:
        exp: the experiment from `build_experiment`.
        store: its open store (the summary line reads it).
        spec: the command's options (store path, quiet).
        watch: as `execute`'s.
        timer: as `execute`'s.

    Returns:
        The command's exit code, 0.
    """
    wall = time.perf_counter()
    run_id = execute(exp, spec.store, quiet=spec.quiet, watch=watch, timer=timer)
    line = summary_line(store, run_id, exp.cfg.run.name)
    print(f"{line}, wall time {time.perf_counter() - wall:.1f} s -> {spec.store}")
    return 0
