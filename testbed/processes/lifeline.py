"""A child process's tie to the process that started it: no orphan outlives its launcher.

Two mechanisms, because neither covers every case alone:
- `die_with_parent(sig)`: Linux's prctl(PR_SET_PDEATHSIG), set through ctypes; the kernel sends
  `sig` the moment the parent dies, however it died (kill -9 too). Set between fork and exec
  (Popen's preexec_fn) it also covers a program we do not own, such as torchrun.
- `watch(pids, grace_s, before_exit)`: a daemon thread that polls every second; once one of
  `pids` is gone (or this process was re-parented) it gives the process `grace_s` to end by
  itself (the signal's clean-up), then calls `before_exit` and ends it with os._exit. It covers other systems, and a process whose
  main thread sits in a long C call (a collective) when the signal's Python handler should run.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send `sig` to this process when its parent dies; False where it cannot
    (not Linux). If the parent died before the call, send it at once."""
    if not sys.platform.startswith("linux"):
        return False
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if parent == 1 or not alive(parent):  # it died before prctl took effect
        os.kill(os.getpid(), sig)
    return True


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (dead, not yet reaped) is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def watch(pids: list[int], grace_s: float, before_exit=None, *, period_s: float = 1.0,
          exit_code: int = 1) -> threading.Thread:
    """Start the daemon thread described above."""
    parent = os.getppid()

    def loop():
        while True:
            gone = next((p for p in pids if not alive(p)), None)
            if gone is None and os.getppid() != parent:
                gone = parent
            if gone is not None:
                break
            time.sleep(period_s)
        time.sleep(grace_s)
        if before_exit is not None:
            try:
                before_exit()
            except Exception:
                pass
        os._exit(exit_code)

    thread = threading.Thread(target=loop, name="lifeline", daemon=True)
    thread.start()
    return thread
