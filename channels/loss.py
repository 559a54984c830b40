"""Loss processes of one directed link: outcome of its k-th transmission, drawn in order."""
from __future__ import annotations

import numpy as np

from channels.randomness import Stream


class LossProcess:
    # Index-based processes: the k-th outcome does not depend on when the transmission starts,
    # so `peek(n)` can tell the next n outcomes before they happen and `skip(n)` commits them.
    indexed = True

    def draw(self, times: np.ndarray) -> np.ndarray:  # -> bool "lost" per transmission
        raise NotImplementedError

    def peek(self, n: int) -> np.ndarray:
        raise NotImplementedError

    def skip(self, n: int) -> None:
        self.draw(np.zeros(n))


class NoLoss(LossProcess):
    def draw(self, times):
        return np.zeros(len(times), dtype=bool)

    def peek(self, n):
        return np.zeros(n, dtype=bool)

    def skip(self, n):
        pass


class Bernoulli(LossProcess):
    def __init__(self, p: float, seed: int):
        self.p = p
        self._u = Stream(seed)

    def draw(self, times):
        return self._u.take(len(times)) < self.p

    def peek(self, n):
        return self._u.peek(n) < self.p

    def skip(self, n):
        self._u.take(n)


class GilbertElliott(LossProcess):
    """Two-state Markov chain stepped once per transmission; each state has its loss rate.

    The chain starts in its stationary distribution, so the long-run loss rate is
    (p_bg * loss_good + p_gb * loss_bad) / (p_gb + p_bg) from the first packet on.
    """

    def __init__(self, p_good_to_bad, p_bad_to_good, loss_good, loss_bad, seed: int):
        self.p_gb, self.p_bg = p_good_to_bad, p_bad_to_good
        self.loss_good, self.loss_bad = loss_good, loss_bad
        self._u_state = Stream(seed)
        self._u_loss = Stream(seed + 1)
        total = self.p_gb + self.p_bg
        pi_bad = self.p_gb / total if total > 0 else 0.0
        self.bad = bool(self._u_state.take(1)[0] < pi_bad)

    def draw(self, times):
        n = len(times)
        lost, self.bad = self._outcomes(self._u_state.take(n), self._u_loss.take(n))
        return lost

    def peek(self, n):
        return self._outcomes(self._u_state.peek(n), self._u_loss.peek(n))[0]

    def _outcomes(self, u, u_loss):
        n = u.size
        flip_from_good = np.flatnonzero(u < self.p_gb)
        flip_from_bad = np.flatnonzero(u < self.p_bg)
        state = np.empty(n, dtype=bool)
        i, s = 0, self.bad
        # Walk sojourn by sojourn: state k applies to packet k, u[k] decides the state after it.
        while i < n:
            flips = flip_from_bad if s else flip_from_good
            j = np.searchsorted(flips, i)
            if j == flips.size:
                state[i:] = s
                break
            k = int(flips[j])
            state[i:k + 1] = s
            s, i = not s, k + 1
        rate = np.where(state, self.loss_bad, self.loss_good)
        return u_loss < rate, s


class FadingLoss(LossProcess):
    """Packet error rate from the SNR of the coherence block the packet starts in."""
    indexed = False

    def __init__(self, fading, seed: int):
        self.fading = fading
        self._u = Stream(seed)

    def draw(self, times):
        return self._u.take(len(times)) < self.fading.per(np.asarray(times, dtype=float))

    def draw_below(self, per: float) -> bool:
        """Lost at packet error rate `per` (one uniform from the same stream as `draw`'s): a
        frame received under interference (csma.capture_per)."""
        return bool(self._u.take(1)[0] < per)


def build_loss(loss: dict, seed: int, fading=None) -> LossProcess:
    model = loss["model"]
    if model == "none":
        return NoLoss()
    if model == "bernoulli":
        return Bernoulli(loss["p"], seed)
    if model == "gilbert_elliott":
        return GilbertElliott(loss["p_good_to_bad"], loss["p_bad_to_good"], loss["loss_good"],
                              loss["loss_bad"], seed)
    if model == "fading":
        return FadingLoss(fading, seed)
    raise ValueError(model)
