"""Subcommands of the `testbed` CLI, one module each with `register(subparsers)`.

Commands raise errors rather than print them: testbed/cli.py is the one boundary that turns an
error into one line and an exit code (testbed/errors.py says which kind is which).
"""
from __future__ import annotations

import errno
import socket
from pathlib import Path

from lgc_schema import OptionError
from testbed.errors import UserError
from testbed.records.store import Store

DEFAULT_STORE = "runs.db"


def add_store_arg(parser) -> None:
    parser.add_argument("--store", default=DEFAULT_STORE, metavar="PATH",
                        help=f"SQLite store file (default: {DEFAULT_STORE} in the working directory)")


def ray_working_dir(args) -> Path:
    """`--ray-working-dir DIR` checked against `--ray` and the experiment file (`args.file`),
    which must lie inside DIR (each node runs its copy of DIR); DIR, resolved."""
    folder = Path(args.ray_working_dir).resolve()
    if args.ray is None:
        raise OptionError("--ray-working-dir", args.ray_working_dir, "given with --ray")
    if not folder.is_dir():
        raise OptionError("--ray-working-dir", args.ray_working_dir, "an existing folder")
    if not Path(args.file).resolve().is_relative_to(folder):
        raise OptionError("--ray-working-dir", args.ray_working_dir,
                          f"a folder that holds the experiment file {args.file}")
    return folder


def open_store(path: str):
    """An existing store (StoreError naming the path if there is none or it is not one)."""
    return Store(path, create=False)


def listen_error(host: str, port: int, err: OSError) -> UserError:
    """The one line for a dashboard address that cannot be listened on (exit 2)."""
    if err.errno == errno.EADDRINUSE:
        free = next((p for p in range(port + 1, min(port + 50, 65536)) if can_listen(host, p)), None)
        hint = f" (e.g. --port {free}; make demo PORT={free})" if free else ""
        return UserError(f"--port {port}: {host}:{port} is in use by another program; allowed: "
                         f"a free port{hint}")
    return UserError(f"--host {host} --port {port}: cannot listen there "
                     f"({err.strerror or err}); allowed: an address of this machine and a free port")


def can_listen(host: str, port: int) -> bool:
    """Whether a server could listen on host:port now (bound as the dashboard's server binds:
    with SO_REUSEADDR, so a port in TIME_WAIT counts as free)."""
    return check_listen(host, port) is None


def check_listen(host: str, port: int) -> OSError | None:
    """None when host:port can be listened on now, else the OSError binding it raised."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as e:
        return e
    family, kind, proto, _, addr = infos[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(addr)
            s.listen(1)
        except OSError as e:
            return e
    return None
