"""The one loop: every kind of run's rounds, stopped, steered, recorded, evaluated and saved.

A driver (testbed/run/rounds.py `Driver`) makes the rounds; this loop, written once for every kind
of run, does the rest, per round:

  1. the stop check (a request ends the run `stopped`),
  2. the dashboard's pending controls (testbed/run/steering.py),
  3. the driver's next round (`Driver.rounds` is advanced here, once, lazily; a driver whose
     rounds end early has completed the run),
  4. the round's rows, by the one row writer (`Loop.write_rows`): iterations, nodes (with
     each worker's energy over the round, testbed/run/energy_accounting.py) and links, and the
     evaluation rows the round brought,
  5. evaluation (`Driver.evaluate` on `run.eval_every` and after the last round, unless it
     returns None), flush (`run.flush_every`) and checkpoint (`run.checkpoint_every`),
  6. progress, and the stop at `run.target_accuracy` when `run.stop_at_accuracy`.

The progress callback is the one hook a caller watches the run by: it gets each round's
`Progress` (`evaluated`: the round brought a test accuracy) and may end the run by raising
`testbed.errors.Pruned` (`testbed tune`'s pruner): the run is then recorded `pruned`.

Optional driver methods the loop uses where present: `describe()` (figures for the start
event), `notes()` (one-line notes at start), `eval_metrics()` (columns stored with each
evaluation). A checkpoint holds each part's state under its own key (testbed/run/checkpoint.py):
the loop's (round, clock, accuracy, stage), the link layer's, the global generators' and the
driver's `state_dict()`.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from testbed.emulation.timing import Timer, timed
from testbed.errors import Pruned
from testbed.processes.heap import frozen_heap
from testbed.records.graph_json import graph_to_json
from testbed.run import checkpoint
from testbed.run.energy_accounting import node_energy
from testbed.run.rounds import Driver, Round
from testbed.run.steering import apply_controls


@dataclass
class Progress:
    iteration: int
    iterations: int
    virtual_time_s: float
    bits: int
    train_loss: float
    accuracy: float | None
    stage: str
    evaluated: bool = False      # this round brought an evaluation (accuracy is its)


class Loop:
    """Runs `driver`'s rounds in `world` (testbed/run/setup.py) into the world's store."""

    def __init__(self, world, driver: Driver, *,
                 progress: Callable[[Progress], None] | None = None,
                 should_stop: Callable[[], bool] | None = None, timer: Timer | None = None,
                 evaluate: Callable[[], tuple[float, float] | None] | None = None,
                 eval_metrics: Callable[[], dict] | None = None,
                 checkpoint_path: Callable[[int], object] | None = None):
        """`evaluate` / `eval_metrics`: instead of the driver's (a torchrun rank's: rank 0's,
        broadcast); `checkpoint_path(run_id)`: where checkpoints go (None: no checkpoints)."""
        self.world, self.driver = world, driver
        self.progress, self.timer = progress, timer
        self.should_stop = should_stop or (lambda: False)
        self.evaluate = evaluate or driver.evaluate
        self.eval_metrics = eval_metrics or getattr(driver, "eval_metrics", None) or dict
        self.checkpoint_path = checkpoint_path
        self.iterations = driver.budget()
        self.next_iteration = 0      # where the loop starts: after a resumed checkpoint's
        self.accuracy: float | None = None   # the last evaluation's
        self.stage: str | None = None        # the stage of the last round
        self.evaluated = False               # whether the round going on brought an evaluation
        self.iteration: int | None = None    # the round going on
        self._wall_offset = 0.0      # wall seconds of the run before a resume

    # ------------------------------------------------------------------ start and finish
    def start(self) -> int:
        world, cfg = self.world, self.world.cfg
        link = cfg.network.get("link", {}) if isinstance(cfg.network, dict) else {}
        # a driver's own tables beside the file's (a Flower app: what it ran and with what)
        config = {**cfg.as_dict(), **getattr(self.driver, "config_tables", dict)()}
        run_id = world.store.create_run(
            cfg.run.name, config, method=cfg.compression.method,
            topology=cfg.network.get("topology"), workers=len(world.workers),
            bandwidth_mbps=link.get("bandwidth_mbps"), graph=graph_to_json(world.graph))
        world.opened(run_id)
        describe = getattr(self.driver, "describe", dict)
        world.store.append_event(run_id, "start", {"iterations": self.iterations, **describe()},
                                 iteration=0, virtual_time_s=0.0)
        for note in getattr(self.driver, "notes", list)():
            world.store.append_event(run_id, "note", {"note": note}, iteration=0, virtual_time_s=0.0)
            print(f"note: {note}", file=sys.stderr)
        world.store.flush()
        return run_id

    def run(self) -> int:
        world = self.world
        if world.run_id is None:
            self.start()
        try:
            with frozen_heap() as settle:   # testbed/processes/heap.py: no full collector
                self._loop(settle)          # passes over what the first round left alive
        except Pruned as e:   # the progress callback's decision: an end, not a failure
            world.store.append_event(world.run_id, "pruned", {"reason": str(e)},
                                     iteration=self.iteration, virtual_time_s=world.clock)
            world.store.finish_run(world.run_id, "pruned", str(e))
            return world.run_id
        except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (testbed.errors.Stopped)
            how = f"stopped by {e.args[0]}" if e.args else "interrupted by the user (SIGINT)"
            world.store.finish_run(world.run_id, "stopped", how)
            raise
        except Exception as e:
            world.store.append_event(world.run_id, "error", {"error": f"{type(e).__name__}: {e}"},
                                     virtual_time_s=world.clock)
            world.store.finish_run(world.run_id, "failed", f"{type(e).__name__}: {e}")
            raise
        return world.run_id

    # ------------------------------------------------------------------ the loop
    def _loop(self, settle: Callable[[], None] = lambda: None) -> None:
        world = self.world
        wall0 = time.perf_counter() - self._wall_offset
        rounds = iter(self.driver.rounds(self.next_iteration))
        for it in range(self.next_iteration, self.iterations):
            if self.should_stop():
                world.store.finish_run(world.run_id, "stopped", "stopped on request")
                return
            apply_controls(world, it)
            rnd = next(rounds, None)
            if rnd is None:   # the driver's rounds ended: the run is complete
                break
            self.evaluated, self.iteration = False, it
            if rnd.stage is not None and rnd.stage != self.stage:  # None: the stage stays
                world.store.append_event(world.run_id, "stage", {"stage": rnd.stage}, iteration=it,
                                         virtual_time_s=rnd.start if rnd.stage_at is None else rnd.stage_at)
                self.stage = rnd.stage
            bits = self.write_rows(rnd, time.perf_counter() - wall0)
            self._evaluate_and_save(it, rnd, wall0)
            if it == self.next_iteration:
                settle()
            if self.progress:
                self.progress(Progress(it + 1, self.iterations, world.clock, bits,
                                       rnd.train_loss, self.accuracy, self.stage, self.evaluated))
            if self._target_reached(it):
                break
        world.store.finish_run(world.run_id, "completed")

    def write_rows(self, rnd: Round, wall_s: float) -> int:
        """The one row writer: the round's rows (iterations, nodes, links) into the store, the
        clock being where the round left it; the bits it carried."""
        world, it, t = self.world, rnd.index, rnd.start
        traffic, left_out, ready = rnd.report.traffic, rnd.left_out, rnd.ready
        taking_part = set(rnd.taking_part)
        bits_up, bits_down = sum(traffic.bits_up.values()), sum(traffic.bits_down.values())
        compute = {w: rnd.compute[w] if w in rnd.compute else max(0.0, ready.get(w, t) - t)
                   for w in world.workers}
        energy = {w: node_energy(world.energy[w], world.clock - t, compute[w], w not in taking_part,
                                 traffic.radio.get(w, (0.0, 0.0))) for w in world.workers}
        stale = rnd.staleness
        world.store.append_iteration(
            world.run_id,
            {"iteration": it, "stage": self.stage, "virtual_time_s": world.clock,
             "wall_time_s": wall_s, "train_loss": rnd.train_loss,
             "bits_up": bits_up, "bits_down": bits_down, "left_out": len(left_out),
             "energy_j": sum(e["energy_j"] for e in energy.values()),
             "participants": rnd.participants,
             "staleness": float(np.mean(list(stale.values()))) if stale else None,
             **{f"replies_{k}": n for k, n in (rnd.replies or {}).items()},
             **vars(rnd.report.timing)},
            nodes=[{"iteration": it, "node": w, "bits_up": traffic.bits_up.get(w, 0),
                    "bits_down": traffic.bits_down.get(w, 0), "compute_s": compute[w],
                    "uplink_done_s": traffic.uplink_done.get(w), "left_out": left_out.get(w),
                    "drift_norm": rnd.drift.get(w), "staleness": stale.get(w), **energy[w]}
                   for w in world.workers],
            links=[{"iteration": it, "src": u, "dst": v, **row}
                   for (u, v), row in traffic.links.items()])
        for row in rnd.evaluations:
            world.store.append_eval(world.run_id, {"iteration": it, "virtual_time_s": world.clock,
                                                   **row})
            if row.get("test_accuracy") is not None:
                self.accuracy = row["test_accuracy"]
                self.evaluated = True
        return bits_up + bits_down

    def _evaluate_and_save(self, it: int, rnd: Round, wall0: float) -> None:
        """Evaluate, flush and checkpoint when their `run.*_every` says so (and after the last
        round, but no checkpoint then)."""
        world, run, last = self.world, self.world.cfg.run, it == self.iterations - 1
        if (it + 1) % run.eval_every == 0 or last:
            with timed(self.timer, "eval", it):
                result = self.evaluate()
            if result is not None:
                test_loss, self.accuracy = result
                self.evaluated = True
                world.store.append_eval(world.run_id, {"iteration": it, "virtual_time_s": world.clock,
                                                       "test_loss": test_loss,
                                                       "test_accuracy": self.accuracy,
                                                       **self.eval_metrics()})
        if (it + 1) % run.flush_every == 0 or last:
            world.store.flush()
        every = run.checkpoint_every
        if self.checkpoint_path and every and (it + 1) % every == 0 and not last:
            world.store.flush()  # the checkpoint never runs ahead of the committed rows
            checkpoint.save(self.checkpoint_path(world.run_id),
                            self.state_dict(it, wall_time_s=time.perf_counter() - wall0))

    def _target_reached(self, it: int) -> bool:
        run, world = self.world.cfg.run, self.world
        if not (run.stop_at_accuracy and run.target_accuracy and self.accuracy is not None
                and self.accuracy >= run.target_accuracy):
            return False
        world.store.append_event(world.run_id, "target_reached", {"accuracy": self.accuracy},
                                 iteration=it, virtual_time_s=world.clock)
        return True

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self, iteration: int, wall_time_s: float = 0.0) -> dict:
        """Everything the rounds after `iteration` depend on, each part's under its own key
        (testbed/run/checkpoint.py's layout): the loop's, the link layer's, the global
        generators' and the driver's."""
        return {"loop": {"iteration": iteration, "clock": self.world.clock, "accuracy": self.accuracy,
                         "stage": self.stage, "wall_time_s": wall_time_s},
                "network": self.world.network.state_dict(),
                "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state()},
                "driver": self.driver.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.driver.load_state_dict(state["driver"])
        self.world.network.load_state_dict(state["network"])
        torch.set_rng_state(state["rng"]["torch"])
        np.random.set_state(state["rng"]["numpy"])
        loop = state["loop"]
        self.world.clock, self.accuracy, self.stage = loop["clock"], loop["accuracy"], loop["stage"]
        self.next_iteration = loop["iteration"] + 1

    def resume(self, run_id: int, state: dict) -> None:
        """Continue run `run_id` of the store after the checkpoint `state`: its rows of later
        iterations go, and the loop starts where the checkpoint left off."""
        world = self.world
        self.load_state_dict(state)
        after = state["loop"]["iteration"]
        self._wall_offset = state["loop"]["wall_time_s"]
        world.store.rewind_run(run_id, after)
        world.opened(run_id)
        world.refresh_graph_json()  # links steered before the checkpoint are in its network
        world.store.append_event(run_id, "resume", {"after_iteration": after},
                                 iteration=after, virtual_time_s=world.clock)
        world.store.flush()
