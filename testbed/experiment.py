"""The run of one experiment file: its world, the driver its file asks for, and the one loop.

`Experiment(cfg, store)` builds the world from `[network]` + `[run]` (testbed/run/setup.py), the
training parts on top, the driver (testbed/drivers/data_parallel.py, or testbed/drivers/federated.py with
`[federated]`) and the loop (testbed/run/loop.py), and runs it: `start()`, `run()`, `resume(run_id,
state)`, `run_id`, `iterations`, `progress`. Its parts are `world`, `training`, `driver` and
`loop`. Where the run's processes are is its placement: `LocalPlacement` (every worker in this
process) or a torchrun rank (testbed/distributed/rank.py's `Rank`: the null store, the
gradients from the ranks, the rank-0 link, the replica check, rank 0's evaluation and stop
decision, its own checkpoint file); both answer `Placement`'s calls.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from testbed.drivers.data_parallel import DataParallelDriver, GradientSource
from testbed.drivers.federated import FederatedDriver, client_names
from testbed.emulation.iteration_report import ClockedTransport
from testbed.emulation.timing import Timer
from testbed.errors import ExperimentError
from testbed.processes.threads import DEFAULT_THREADS, apply_threads
from testbed.run import checkpoint
from testbed.run.loop import Loop, Progress
from testbed.run.setup import Training, World, build_training, build_world

__all__ = ["DEFAULT_THREADS", "Experiment", "ExperimentError", "LocalPlacement", "Placement",
           "Progress", "apply_threads"]


class Placement(Protocol):
    """Where a run's workers compute and who decides: what `Experiment` asks of it."""
    checkpoints: bool                     # whether the run writes checkpoints

    def store_for(self, store): ...                        # the store this process writes
    def transport(self, world) -> ClockedTransport: ...           # the phases' carrier
    def gradients(self, world, training) -> GradientSource | None: ...  # None: the worker pool
    def client_memories(self, world) -> Any: ...           # federated error memories (None: local)
    def prepare(self, exp: Experiment) -> None: ...        # checks once the parts are built
    def stop_decision(self, local): ...                    # the loop's should_stop
    def evaluation(self, driver): ...                      # the loop's evaluate (None: the driver's)
    def checkpoint_path(self, run_id: int): ...            # where this process checkpoints
    def started(self, exp: Experiment) -> int: ...         # after the run's start: its id
    def resuming(self, run_id: int, state: dict) -> None: ...  # checks before a resume
    # and three that may be None (the driver's and loop's own behaviour): `check_replica(it,
    # agg)`, `train_clients(driver, slots, clients, it)`, `eval_metrics()`


class LocalPlacement:
    """Every worker in this process: the store, the emulated network and the loop's own
    decisions as they are."""
    checkpoints = True
    check_replica = train_clients = eval_metrics = None

    store = None

    def store_for(self, store):
        self.store = store
        return store

    def transport(self, world) -> ClockedTransport:
        return world.emulated_transport()

    def gradients(self, world, training) -> None:
        return None

    def client_memories(self, world) -> None:
        return None

    def prepare(self, exp: Experiment) -> None:
        pass

    def stop_decision(self, local):
        return local

    def evaluation(self, driver) -> None:
        return None

    def checkpoint_path(self, run_id: int):
        return checkpoint.path_for(self.store.path, run_id)

    def started(self, exp: Experiment) -> int:
        return exp.world.run_id

    def resuming(self, run_id: int, state: dict) -> None:
        pass


class Experiment:
    """One run of one experiment file, written into a store as it goes."""

    def __init__(self, cfg, store, *, progress: Callable[[Progress], None] | None = None,
                 should_stop: Callable[[], bool] | None = None,
                 gradients: Callable[[World, Training], GradientSource] | None = None,
                 transport: Callable[[World], ClockedTransport] | None = None,
                 timer: Timer | None = None, placement: Placement | None = None):
        """`gradients` / `transport`: factories called with the set-up world (and training
        parts) (default: the placement's: every worker in this process / the emulated network);
        `timer(what, wall_s, iteration)` receives the wall seconds of compute, compression,
        emulation and eval (the harness); `placement`: where the workers are (default
        `LocalPlacement`; a torchrun rank: testbed/distributed/rank.py's `Rank`)."""
        self.cfg = cfg
        self.placement = place = placement if placement is not None else LocalPlacement()
        self.store = store = place.store_for(store)
        federated = cfg.federated is not None
        self.world = world = build_world(cfg, store, traced=client_names(cfg) if federated else None,
                                         timer=timer)
        self.training = training = build_training(cfg, world)
        made = transport(world) if transport else place.transport(world)
        if not isinstance(made, ClockedTransport):
            raise TypeError(f"{type(made).__name__} has no virtual clock: the loop's transport opens "
                            "and closes each iteration (begin/end, testbed/emulation/iteration_report.py)")
        if federated:
            self.driver = FederatedDriver(world, training, transport=made, check=place.check_replica,
                                          train_clients=place.train_clients,
                                          memory=place.client_memories(world))
        else:
            self.driver = DataParallelDriver(
                world, training, transport=made, check=place.check_replica,
                gradients=gradients(world, training) if gradients else place.gradients(world, training))
        place.prepare(self)
        self.loop = Loop(world, self.driver, progress=progress, timer=timer,
                         should_stop=place.stop_decision(should_stop),
                         evaluate=place.evaluation(self.driver), eval_metrics=place.eval_metrics,
                         checkpoint_path=place.checkpoint_path if place.checkpoints else None)

    # ------------------------------------------------------------------ what callers use
    @property
    def run_id(self) -> int | None:
        return self.world.run_id

    @property
    def iterations(self) -> int:
        return self.loop.iterations

    @property
    def progress(self):
        return self.loop.progress

    @progress.setter
    def progress(self, fn) -> None:
        self.loop.progress = fn

    @property
    def should_stop(self):
        return self.loop.should_stop

    @should_stop.setter
    def should_stop(self, fn) -> None:
        """Asked before every round; under torchrun rank 0 decides for every rank."""
        self.loop.should_stop = self.placement.stop_decision(fn)

    @property
    def checkpoints(self) -> bool:
        """Whether the run writes checkpoints (`run.checkpoint_every`, `testbed resume`)."""
        return self.placement.checkpoints

    def checkpoint_path(self, run_id: int):
        return self.placement.checkpoint_path(run_id)

    def start(self) -> int:
        self.loop.start()
        return self.placement.started(self)

    def run(self) -> int:
        if self.world.run_id is None:
            self.start()
        return self.loop.run()

    def resume(self, run_id: int, state: dict) -> None:
        """Continue run `run_id` of the store after the checkpoint `state`."""
        self.placement.resuming(run_id, state)
        self.loop.resume(run_id, state)
