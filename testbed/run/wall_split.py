"""Where a run's wall seconds went, collected through the loop's timer hook.

`WallSplit` is a `Timer` (testbed/emulation/timing.py): `testbed.api.run_spec(..., timer=)`
hands it to the loop, which reports compute, compression, emulation and eval; a `TimedStore`
reports the store's writes; run_spec itself reports "setup" (building the experiment) and "run"
(the loop, from its first iteration to its end). Pieces reported during set-up are not the
run's: "setup" starts the count afresh.
"""
from __future__ import annotations

PIECES = ("compute", "compression", "emulation", "store", "eval")


class WallSplit:
    """The wall seconds of one run by piece, compression also per iteration."""
    __slots__ = ("pieces", "compression_by_iteration", "setup_s", "run_s")

    def __init__(self) -> None:
        self.pieces = {name: 0.0 for name in PIECES}
        self.compression_by_iteration: dict[int, float] = {}
        self.setup_s = 0.0      # building the experiment (data, model, network, store rows)
        self.run_s = 0.0        # the loop, first iteration to last

    def __call__(self, what: str, seconds: float, iteration: int) -> None:
        if what == "setup":     # what set-up wrote or timed is not the run's
            self.setup_s = seconds
            self.pieces = dict.fromkeys(PIECES, 0.0)
            self.compression_by_iteration.clear()
        elif what == "run":
            self.run_s = seconds
        else:
            self.pieces[what] = self.pieces.get(what, 0.0) + seconds
            if what == "compression":
                self.compression_by_iteration[iteration] = (
                    self.compression_by_iteration.get(iteration, 0.0) + seconds)

    def as_dict(self) -> dict:
        """JSON-ready (it travels back from a sweep's worker process)."""
        return {"pieces": dict(self.pieces), "setup_s": self.setup_s, "run_s": self.run_s,
                "compression_by_iteration": {str(k): v for k, v in
                                             self.compression_by_iteration.items()}}
