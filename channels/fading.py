"""Block fading: path loss + shadowing + Rayleigh/Rician gain redrawn per coherence interval.

SNR = P_tx - (L_ref + 10 n log10(d)) - shadowing - (N_0 + 10 log10(B) + NF)   [dB]
      times the block's power gain X (E[X] = 1).
Rate: Shannon `efficiency * B * log2(1 + SNR)` or the highest MCS whose threshold the SNR meets.
Packet error rate: Shannon rate is adapted to the block, so a packet is lost only below
`outage_snr_db` (if set); with an MCS table PER = 1 / (1 + 9 exp(slope (SNR_dB - threshold))),
i.e. 10% at the MCS threshold, falling off as a waterfall above it.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from channels.errors import ChannelConfigError
from channels.randomness import IndexedStream


@dataclass(frozen=True)
class McsTable:
    rate_mbps: np.ndarray   # at 20 MHz
    min_snr_db: np.ndarray


def load_mcs_table(path: str | None = None) -> McsTable:
    if path is None:
        text = resources.files("channels").joinpath("data/mcs_80211.csv").read_text()
        name = "channels/data/mcs_80211.csv"
    else:
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise ChannelConfigError("network.link.loss.mcs_table", path, f"a readable CSV file ({e.strerror})")
        name = path
    rows = [ln for ln in text.splitlines()]
    rates, snrs = [], []
    reader = csv.reader(rows)
    header = None
    for lineno, row in enumerate(reader, start=1):
        if not row or row[0].lstrip().startswith("#"):
            continue
        if header is None:
            header = [c.strip() for c in row]
            if "rate_mbps" not in header or "min_snr_db" not in header:
                raise ChannelConfigError(f"{name}:{lineno}", ",".join(row),
                                         "a header with columns rate_mbps and min_snr_db")
            continue
        try:
            rates.append(float(row[header.index("rate_mbps")]))
            snrs.append(float(row[header.index("min_snr_db")]))
        except (ValueError, IndexError):
            raise ChannelConfigError(f"{name}:{lineno}", ",".join(row), "numbers in rate_mbps and min_snr_db")
    if not rates:
        raise ChannelConfigError(name, "", "at least one MCS row")
    order = np.argsort(snrs)
    return McsTable(np.asarray(rates)[order], np.asarray(snrs)[order])


def mean_snr_db(p: dict, distance_m: float, shadow_db: float) -> float:
    path_loss = p["reference_loss_db"] + 10 * p["path_loss_exponent"] * math.log10(max(distance_m, 1e-3))
    noise = p["noise_dbm_per_hz"] + 10 * math.log10(p["channel_bandwidth_mhz"] * 1e6) + p["noise_figure_db"]
    return p["tx_power_dbm"] - path_loss - shadow_db - noise


# Coherence blocks whose SNR FadingChannel computes at once (40 s of 10 ms blocks), and the most
# a single query is served from the table.
SNR_SPAN, SNR_SPAN_MAX = 4096, 1 << 20


class FadingChannel:
    def __init__(self, params: dict, distance_m: float, seed: int, distance_at=None):
        """`distance_at(t)`: the distance between the link's ends at times t when one moves
        (channels/mobility.py); the mean SNR then follows it, taken at each coherence block's
        start (one SNR per block, as without movement)."""
        self.p = params
        self.coherence_s = params["coherence_ms"] / 1000.0
        self.bandwidth_hz = params["channel_bandwidth_mhz"] * 1e6
        self.shadow_db = float(np.random.default_rng(seed).standard_normal()) * params["shadowing_db"]
        self.distance_at = distance_at
        self.mean_snr_db = mean_snr_db(params, distance_m, self.shadow_db)
        self.mean_snr = 10 ** (self.mean_snr_db / 10)
        self._gains = IndexedStream(seed + 1, "normal", width=2)
        self.mcs = load_mcs_table(params.get("mcs_table")) if params["rate"] == "mcs" else None
        self.min_rate_bps = params["min_rate_mbps"] * 1e6

    def block(self, t):
        return np.floor(np.asarray(t, dtype=float) / self.coherence_s).astype(np.int64)

    def gain(self, blocks) -> np.ndarray:
        """Power gain X of each block, E[X] = 1."""
        z = self._gains.get(blocks)
        kind = self.p["fading"]
        if kind == "none":
            return np.ones(len(z))
        if kind == "rayleigh":
            return (z[:, 0] ** 2 + z[:, 1] ** 2) / 2
        k = self.p["k_factor"]
        re = math.sqrt(k / (k + 1)) + z[:, 0] * math.sqrt(1 / (2 * (k + 1)))
        im = z[:, 1] * math.sqrt(1 / (2 * (k + 1)))
        return re ** 2 + im ** 2

    def _one_block(self, what: str, t: np.ndarray, fn) -> np.ndarray:
        """fn(t) for one transmission's time: a function of its coherence block alone, so kept
        for the block (a CSMA cell asks for the SNR, rate and error rate of every attempt, many
        in one block)."""
        b = int(self.block(t)[0])
        memo = self.__dict__.setdefault("_memo", {})
        hit = memo.get(what)
        if hit is None or hit[0] != b:
            hit = memo[what] = (b, fn(t))
        return hit[1].copy()

    def snr(self, t) -> np.ndarray:
        t = np.atleast_1d(np.asarray(t, dtype=float))
        if t.size == 1:
            return self._one_block("snr", t, lambda x: self._snr(self.block(x)))
        return self._snr(self.block(t))

    def _snr(self, blocks: np.ndarray) -> np.ndarray:
        """The SNR of each coherence block: a function of the block alone, so computed for a span
        of SNR_SPAN blocks (or twice the span asked for) at a time and looked up (a packet engine
        asks for a few blocks per packet train; a moving link's distance costs per call)."""
        blocks = np.asarray(blocks, dtype=np.int64)
        if not blocks.size:
            return self._snr_of(blocks)
        lo, hi = int(blocks.min()), int(blocks.max())
        tab = self.__dict__.get("_snr_tab")
        if tab is None or lo < tab[0] or hi >= tab[0] + tab[1].size:
            if hi - lo >= SNR_SPAN_MAX:
                return self._snr_of(blocks)
            tab = self._snr_tab = (lo, self._snr_of(np.arange(lo, lo + max(SNR_SPAN, 2 * (hi - lo + 1)),
                                                              dtype=np.int64)))
        return tab[1][blocks - tab[0]]

    def _snr_of(self, blocks: np.ndarray) -> np.ndarray:
        if self.distance_at is None:
            return self.mean_snr * self.gain(blocks)
        d = np.maximum(self.distance_at(blocks * self.coherence_s), 1e-3)
        p = self.p
        # mean_snr_db's formula, per block, at the distance at the block's start
        mean_db = (p["tx_power_dbm"] - p["reference_loss_db"] - 10 * p["path_loss_exponent"] * np.log10(d)
                   - self.shadow_db - (p["noise_dbm_per_hz"] + 10 * math.log10(p["channel_bandwidth_mhz"] * 1e6)
                                       + p["noise_figure_db"]))
        return 10 ** (mean_db / 10) * self.gain(blocks)

    def _mcs_index(self, snr_db):
        i = np.searchsorted(self.mcs.min_snr_db, snr_db, side="right") - 1
        return np.maximum(i, 0)

    def rate_bps(self, t) -> np.ndarray:
        t = np.atleast_1d(np.asarray(t, dtype=float))
        return self._one_block("rate", t, self._rate_bps) if t.size == 1 else self._rate_bps(t)

    def _rate_bps(self, t: np.ndarray) -> np.ndarray:
        return self._rate_from_snr(self.snr(t))

    def _rate_from_snr(self, snr: np.ndarray) -> np.ndarray:
        if self.mcs is None:
            rate = self.p["efficiency"] * self.bandwidth_hz * np.log2(1 + snr)
        else:
            i = self._mcs_index(10 * np.log10(snr))
            rate = self.mcs.rate_mbps[i] * 1e6 * (self.bandwidth_hz / 20e6)
        return np.maximum(rate, self.min_rate_bps)

    def per(self, t) -> np.ndarray:
        t = np.atleast_1d(np.asarray(t, dtype=float))
        return self._one_block("per", t, self._per) if t.size == 1 else self._per(t)

    def _per(self, t: np.ndarray) -> np.ndarray:
        return self._per_from_snr(self.snr(t))

    def _per_from_snr(self, snr: np.ndarray) -> np.ndarray:
        snr_db = 10 * np.log10(snr)
        if self.mcs is None:
            out = self.p.get("outage_snr_db")
            if out is None:
                return np.zeros(snr_db.shape)
            return (snr_db < out).astype(float)
        thr = self.mcs.min_snr_db[self._mcs_index(snr_db)]
        return 1.0 / (1.0 + 9.0 * np.exp(np.clip(self.p["per_slope_db"] * (snr_db - thr), -50, 50)))

    def threshold_db(self, t) -> np.ndarray:
        """The 10% packet error SNR (dB) of the MCS each transmission at t goes at (an MCS table
        only): where the waterfall of its packet error rate sits, interference or not."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        return self._one_block("thr", t, lambda x: self._thr_from_snr(self.snr(x)))

    def _thr_from_snr(self, snr: np.ndarray) -> np.ndarray:
        return self.mcs.min_snr_db[self._mcs_index(10 * np.log10(snr))]

    def block_tables(self, first: int, n: int) -> tuple[np.ndarray, ...]:
        """Rate (bit/s), packet error rate, SNR (linear) and, with an MCS table, the rate's 10%
        packet error SNR (dB; else nan) of coherence blocks first .. first + n - 1, by the
        operations `rate_bps`, `per`, `snr` and `threshold_db` apply to one transmission's block
        (the compiled DCF loop reads them per attempt: channels/csma_fast.py)."""
        snr = self._snr_of(np.arange(first, first + n, dtype=np.int64))
        thr = self._thr_from_snr(snr) if self.mcs is not None else np.full(snr.shape, np.nan)
        return self._rate_from_snr(snr), self._per_from_snr(snr), snr, thr
