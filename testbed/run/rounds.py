"""The round contract: what a driver hands the one loop after each round of a run.

A *driver* produces a run's rounds: data-parallel iterations, federated sync rounds, FedBuff
server steps, a Flower strategy's `send_and_receive` calls. The loop (stopping, controls,
evaluation, checkpoints, progress and the one row writer) is written once and knows nothing
else of how a round was made. A driver talks to the link layer only through the declared
transport (`ClockedTransport.begin`, the scheme's phases through `drive`, phases of its own through
`carry_all`, `ClockedTransport.end`); a round made of several transport windows merges their reports
(`IterationReport.merge`). A driver runs in a `World` (testbed/run/setup.py: the network, link
layer, device trace, energy profiles, seed, store and the virtual clock, which the driver
advances: `world.clock` is the round's end when it yields the round).

Optional driver methods the loop uses where present: `describe()` (figures for the run's start
event), `notes()` (one-line notes at start), `eval_metrics()` (columns stored with each of the
loop's evaluations), `config_tables()` (tables stored in the run's config beside the file's).
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from testbed.emulation.iteration_report import IterationReport


@dataclass
class Round:
    """One round (one store iteration) as a driver made it."""
    index: int                        # the store's iteration
    start: float                      # virtual seconds when the round started
    report: IterationReport           # what the transport carried (windows merged)
    losses: list[float]               # the training losses of the nodes that computed
    ready: dict[str, float]           # node -> virtual time its compute ended
    taking_part: list[str]            # nodes awake this round (the others sleep: energy)
    participants: int | None = None   # updates that counted (federated); None: not counted
    staleness: dict[str, int] = field(default_factory=dict)   # node -> its counted update's
    stage: str | None = None          # the scheme's stage (events mark a change); None: as before
    stage_at: float | None = None     # virtual time of the stage's event (default: start)
    drift: dict[str, float] = field(default_factory=dict)   # node -> its replica's drift norm
    # node -> its compute seconds where they are not `ready - start` (a Flower node computes
    # from its own message's arrival): the compute time its energy and row count
    compute: dict[str, float] = field(default_factory=dict)
    # evaluation rows the driver made itself (e.g. a Flower strategy's MetricRecords); the
    # loop still evaluates by `Driver.evaluate` on `run.eval_every` unless that returns None
    evaluations: list[dict] = field(default_factory=list)
    # the replies the server got, by outcome, where a driver counts them (a Flower round):
    # {"ok", "failed" (an error reply), "lost" (never came), "late" (past the timeout)}
    replies: dict[str, int] | None = None

    @property
    def left_out(self) -> dict[str, str]:
        """Node -> why the round went without it ("unavailable", "deadline", "lost", ...)."""
        return self.report.left_out

    @property
    def train_loss(self) -> float:
        """The mean of the computing nodes' training losses (NaN where none computed)."""
        return float(np.mean(self.losses)) if self.losses else float("nan")


class Driver(Protocol):
    """What the loop calls: a run's rounds, its evaluations and its checkpoint state.

    `rounds(first)` is advanced once per round, after the loop's stop check and controls, so
    a driver never runs a round the loop would not record.
    """

    def budget(self) -> int:
        """The length of the run.

        Returns:
            The rounds the run has (the loop stops earlier at a target, a stop or exhaustion).
        """
        ...

    def rounds(self, first: int) -> Iterator[Round]:
        """Run the rounds, one each time the loop advances the iterator.

        Args:
            first: the first round's index (0, or after a resumed checkpoint its next one).

        Returns:
            An iterator of the rounds, each yielded once the world's clock is at its end.
        """
        ...

    def evaluate(self) -> tuple[float, float] | None:
        """Evaluate the model now on the test set.

        Returns:
            Test loss and accuracy; None where the driver reports its own
            (`Round.evaluations`).
        """
        ...

    def state_dict(self) -> dict:
        """What the rounds after this point depend on, for a checkpoint.

        Returns:
            The state `load_state_dict` restores; {} where the run cannot be resumed.
        """
        ...

    def load_state_dict(self, state: dict) -> None:
        """Restore a checkpoint's state before the rounds after it.

        Args:
            state: what `state_dict` returned when the checkpoint was written.
        """
        ...
