"""Errors of the link layer. Every message names the key (or file and line), the bad value and
what is allowed, so a user can fix an experiment file from the message alone."""
from __future__ import annotations

from lgc_schema import OptionError


class ChannelConfigError(OptionError):
    """A bad parameter of the link layer: `key` is the dotted path in the experiment file;
    the one-line message is the schema's (`KEY = VALUE: must be ALLOWED`)."""


class DeliveryError(RuntimeError):
    """Reliable delivery gave up: a packet was lost more times than the retry limit allows."""

    def __init__(self, src: str, dst: str, packet: int, attempts: int, at_s: float):
        self.src, self.dst, self.packet, self.attempts, self.at_s = src, dst, packet, attempts, at_s
        super().__init__(
            f"reliable delivery {src}->{dst} gave up on packet {packet} after {attempts} "
            f"transmissions (retry_limit exceeded) at virtual time {at_s:.6f} s; raise "
            f"network.link.retry_limit, lower the loss, or use delivery = \"best_effort\"")
