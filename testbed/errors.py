"""The kinds of error the `testbed` CLI turns into an exit code, and that mapping (`exit_code`).

- `UserError`: a mistake of the user's (a file, an option, a store, a run name). One line on
  stderr naming the thing, the value and what is allowed; exit 2; nothing was written.
- `RunFailed`: a run that started and then failed for a reason it can name (a link gave up, a
  rank died); one line, exit 1; the store holds the run, marked failed, with its rows so far.
- `Stopped`: SIGTERM (or SIGINT) ended the run; rows flushed, status `stopped`; exit 128 + signal.

Anything else is a bug of the testbed's and stays a traceback (exit 1), so that it is reported.
Errors of the other rooms that are the user's too (a bad `[network]` key, a dataset file that is
not there) are listed beside these in `exit_codes()`: the rooms do not import testbed.
"""
from __future__ import annotations

import signal
from typing import Any

from lgc_schema import OptionError
from nodes.errors import DatasetError, DatasetFileError


class UserError(Exception):
    """One line naming what the user gave, its value and what is allowed (exit 2)."""


class ConfigError(UserError, OptionError):
    """A key of an experiment file or a command-line override; one line: `FILE: key.path =
    value: what is allowed` (testbed/configuration/ raises it)."""

    def __init__(self, key: str, value: Any = None, allowed: str = "", *, source: str | None = None,
                 message: str | None = None, problem: str = "range"):
        self.source = source
        text = message or f"{key} = {value!r}: must be {allowed}"
        super().__init__(key, value, allowed, message=f"{source}: {text}" if source else text,
                         problem=problem)


class NoServerError(ConfigError):
    """A parameter-server exchange asked of a topology without a server (a ring)."""


class SetupError(UserError):
    """The file is valid key by key but its settings do not make a run (e.g. a parameter-server
    method on a ring, a dataset folder that is not there, `device = "cuda"` without a GPU)."""


class ControlError(UserError, ValueError):
    """A steering request that cannot be applied (testbed/records/controls.py checks them); the
    message says which part and why."""


class RunFailed(Exception):
    """A run that began and failed for a reason its message names (exit 1)."""


class Stopped(KeyboardInterrupt):
    """The process was asked to stop by a signal; a KeyboardInterrupt so every `except
    KeyboardInterrupt` clean-up (status `stopped`, rows flushed) runs for SIGTERM as for Ctrl-C."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def stop_on_sigterm() -> None:
    """From now on SIGTERM (systemd, Slurm, Kubernetes, `kill`) stops this process as Ctrl-C does."""
    def handler(signum, frame):
        raise Stopped(signum)
    signal.signal(signal.SIGTERM, handler)


class Pruned(Exception):
    """Raised by a run's progress callback (`testbed tune`'s pruner): the loop ends the run
    with status `pruned`, its message the reason, and returns as from a completed run. Not an
    error: a pruned run ended because its caller judged it hopeless."""


class ExperimentError(RuntimeError):
    """A run that cannot go on (bad combination of settings, a failed link, a bad gradient)."""


class TransportError(RuntimeError):
    """A phase the emulated network cannot carry (e.g. a broadcast that never gets through)."""


def exit_codes() -> list[tuple[type, int]]:
    """The one mapping from error type to exit code (first match wins). The user's mistakes
    are exit 2; the other rooms' own user-error classes are listed here because they do not
    import testbed (lgc_schema.OptionError: a bad key or value of any room, the link layer's and
    the command line's included). Anything not listed is a bug: a traceback, exit 1."""
    return [(Stopped, -1), (UserError, 2), (OptionError, 2), (DatasetError, 2),
            (DatasetFileError, 2), (RunFailed, 1)]


def exit_code(err: BaseException) -> int | None:
    """The exit code for `err`, or None when it is a bug (let the traceback through)."""
    for cls, code in exit_codes():
        if isinstance(err, cls):
            return err.exit_code if code == -1 else code
    if isinstance(err, KeyboardInterrupt):
        return 130
    return None


def one_line(err: BaseException) -> str:
    """An error as the one line the CLI and a sweep's progress print."""
    text = " ".join(str(err).split())
    return text or type(err).__name__
