"""Errors of the link layer. Every message names the key (or file and line), the bad value and
what is allowed, so a user can fix an experiment file from the message alone."""
from __future__ import annotations

from typing import Any


class ChannelConfigError(ValueError):
    """A bad parameter of the link layer: `key` is the dotted path in the experiment file."""

    def __init__(self, key: str, value: Any, allowed: str, *, message: str | None = None):
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(message or f"{key} = {value!r} is not allowed: {allowed}")


class DeliveryError(RuntimeError):
    """Reliable delivery gave up: a packet was lost more times than the retry limit allows."""

    def __init__(self, src: str, dst: str, packet: int, attempts: int, at_s: float):
        self.src, self.dst, self.packet, self.attempts, self.at_s = src, dst, packet, attempts, at_s
        super().__init__(
            f"reliable delivery {src}->{dst} gave up on packet {packet} after {attempts} "
            f"transmissions (retry_limit exceeded) at virtual time {at_s:.6f} s; raise "
            f"network.link.retry_limit, lower the loss, or use delivery = \"best_effort\"")
