"""The run of one experiment file: its world, the driver its file asks for, and the one loop.

`Experiment(cfg, store)` builds the world from `[network]` + `[run]` (testbed/setup.py), the
training parts on top, the driver (testbed/data_parallel.py, or testbed/federated.py with
`[federated]`) and the loop (testbed/loop.py), and runs it: `start()`, `run()`, `resume(run_id,
state)`, `run_id`, `iterations`, `progress`. A torchrun rank passes its rank-specific parts in
(`rank`: testbed/distributed/rank.py): the null store, the gradients from the ranks, the rank-0
link, the replica check, rank 0's evaluation and stop decision, its own checkpoint file.
"""
from __future__ import annotations

from collections.abc import Callable

from nodes.compression.transport import Transport
from testbed import checkpoint
from testbed.data_parallel import DataParallelDriver, GradientSource
from testbed.errors import ExperimentError
from testbed.federated import FederatedDriver, client_names
from testbed.loop import Loop, Progress
from testbed.setup import Training, World, build_training, build_world
from testbed.threads import DEFAULT_THREADS, apply_threads
from testbed.transport import Timer

__all__ = ["DEFAULT_THREADS", "Experiment", "ExperimentError", "Progress", "apply_threads"]


class Experiment:
    """One run of one experiment file, written into a store as it goes."""

    def __init__(self, cfg, store, *, progress: Callable[[Progress], None] | None = None,
                 should_stop: Callable[[], bool] | None = None,
                 gradients: Callable[[World, Training], GradientSource] | None = None,
                 transport: Callable[[World], Transport] | None = None,
                 timer: Timer | None = None, rank=None):
        """`gradients` / `transport`: factories called with the set-up world (and training
        parts) (default: every worker in this process / the emulated network); `timer(what,
        wall_s, iteration)` receives the wall seconds of compute, compression, emulation and
        eval (the harness); `rank`: a torchrun rank's parts (testbed/distributed/rank.py)."""
        self.cfg, self.rank = cfg, rank
        federated = cfg.federated is not None
        if rank is not None:
            store = rank.store_for(store)
            transport = transport or rank.transport
        self.store = store
        self.world = world = build_world(cfg, store, traced=client_names(cfg) if federated else None,
                                         timer=timer)
        self.training = training = build_training(cfg, world)
        made = transport(world) if transport else world.emulated_transport()
        check = rank.check_replica if rank is not None else None
        if federated:
            self.driver = FederatedDriver(
                world, training, transport=made, check=check,
                train_clients=rank.train_clients if rank is not None else None,
                memory=rank.client_memories(world) if rank is not None else None)
        else:
            if gradients is None and rank is not None:
                gradients = rank.gradients
            self.driver = DataParallelDriver(
                world, training, transport=made, check=check,
                gradients=gradients(world, training) if gradients else None)
        if rank is not None:
            rank.prepare(self)
        self.loop = Loop(world, self.driver, progress=progress, timer=timer,
                         should_stop=rank.stop_decision(should_stop) if rank is not None else should_stop,
                         evaluate=rank.evaluation(self.driver) if rank is not None else None,
                         eval_metrics=rank.eval_metrics if rank is not None else None,
                         checkpoint_path=self.checkpoint_path if self.checkpoints else None)

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
        self.loop.should_stop = self.rank.stop_decision(fn) if self.rank is not None else fn

    @property
    def checkpoints(self) -> bool:
        """Whether the run writes checkpoints (`run.checkpoint_every`, `testbed resume`)."""
        return self.rank is None or self.rank.checkpoints

    def checkpoint_path(self, run_id: int):
        if self.rank is not None:
            return self.rank.checkpoint_path(run_id)
        return checkpoint.path_for(self.store.path, run_id)

    def start(self) -> int:
        run_id = self.loop.start()
        if self.rank is not None:
            run_id = self.rank.started(self)
        return run_id

    def run(self) -> int:
        if self.world.run_id is None:
            self.start()
        return self.loop.run()

    def resume(self, run_id: int, state: dict) -> None:
        """Continue run `run_id` of the store after the checkpoint `state`."""
        if self.rank is not None:
            self.rank.resuming(run_id, state)
        self.loop.resume(run_id, state)

    def __getattr__(self, name: str):
        """The run's parts by name, for tools and tests that look inside (the driver's, then
        the world's, then the training parts'): `exp.model`, `exp.scheme`, `exp.clock`..."""
        if name.startswith("__") or name in ("world", "driver", "training", "loop"):
            raise AttributeError(name)
        for part in ("driver", "world", "training"):
            obj = self.__dict__.get(part)
            if obj is not None and hasattr(obj, name):
                return getattr(obj, name)
        raise AttributeError(f"{type(self).__name__} has no {name!r}")

