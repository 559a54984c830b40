"""`testbed` command line: one subcommand per module under testbed/commands/.

Commands raise, never print their errors: `main` is the one error boundary and `testbed.errors.exit_codes()`
the one mapping from error type to exit code (the user's mistakes: one line, exit 2; a run that
failed for a reason it names: one line, exit 1; `Stopped` by SIGTERM: 128 + signal; anything
else is a bug and stays a traceback). docs/reliability.md lists what each fault does.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from testbed.commands import check_listen, listen_error
from testbed.errors import exit_code, one_line, stop_on_sigterm

# Each module exposes `register(subparsers)`; missing optional ones are skipped so one
# unfinished room never breaks the whole CLI.
COMMANDS = ["run", "resume", "runs", "export", "sweep", "tune", "demo", "probe", "dashboard",
            "control", "methods", "keys", "flower"]


# The CLI is the one place that imports dashboards/ (house rule: nothing else depends on the
# dashboard); subcommands reach it through these two functions, imported only when used.
def serve_dashboard(store: str, host: str, port: int, access_log: bool = False,
                    announce=None, starting: str | None = None) -> None:
    """Serve the dashboard until interrupted. The port is bound first: one that is in use is
    the user's error (exit 2) before anything else; `announce()` is called once it listens.
    `starting`: the run about to start (`testbed demo`), which the page waits for while the
    store has none."""
    # deferred: dash, only `testbed dashboard` serves it
    from dashboards.app import make_dashboard_server

    busy = check_listen(host, port)  # werkzeug itself would print a paragraph and exit 1
    if busy is not None:
        raise listen_error(host, port, busy)
    try:
        app, server = make_dashboard_server(store, host, port, access_log=access_log,
                                            starting=starting)
    except OSError as e:
        raise listen_error(host, port, e) from e
    try:
        if announce is not None:
            announce()
        server.serve_forever()
    finally:
        server.server_close()
        app.board.close()


def export_figures(store, run_ref, path, fmt: str):
    """Write a run's dashboard figures as `fmt` ("html" or "png") to `path`."""
    # deferred: plotly, only `testbed export --format html|png`
    from dashboards import export

    writer = {"html": export.export_html, "png": export.export_png}[fmt]
    return writer(store, run_ref, path)


class Parser(argparse.ArgumentParser):
    """argparse, with its usage errors as one line (the usage itself is one `--help` away)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="testbed",
        description="Emulated edge training: workers exchange compressed gradients over an "
                    "emulated wireless link layer; results go to a SQLite store.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"testbed.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"testbed.commands.{name}":
                continue
            raise
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The CLI's one error boundary: see `exit_codes`."""
    parser = build_parser()
    args = parser.parse_args(argv)
    stop_on_sigterm()
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # here, so that a reader gone away is seen inside this boundary
        return code
    except BrokenPipeError:
        return closed_pipe()
    except (Exception, KeyboardInterrupt) as err:
        code = exit_code(err)
        if code is None:
            raise
        if isinstance(err, KeyboardInterrupt):
            print(f"testbed: stopped ({err.args[0] if err.args else 'SIGINT'})", file=sys.stderr)
        else:
            print(f"testbed: error: {one_line(err)}", file=sys.stderr)
        return code


# The exit status of a command whose reader went away (`testbed methods | head -1`): what a
# process killed by SIGPIPE reports to a shell, as `cat` or `grep` would.
CLOSED_PIPE = 128 + 13


def closed_pipe() -> int:
    """The reader of stdout closed the pipe: stop quietly (no traceback, no error line).
    stdout is pointed at /dev/null so that the interpreter's last flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is no file (a test's capture): nothing to redirect
        pass
    return CLOSED_PIPE



if __name__ == "__main__":
    sys.exit(main())
