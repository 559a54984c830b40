"""The method policy: which collective a compression method uses on the file's topology (a ring
has no server, so no 'ps'), and what switching a file to another method sets (the method's
known-good values, registry.KNOWN_GOOD).

It sits on the method registry (nodes.compression.registry: each method's collectives and
known-good values) and raises the testbed's errors (NoServerError), so it lives here, above
nodes; the section checks (testbed.configuration.sections), the loader's method switch
(testbed.configuration.loading) and the run's setup (testbed.run.setup) ask it. Nothing here
prints: a note is a line appended to the caller's `notes`, which the caller prints.
"""
from __future__ import annotations

from nodes.compression.registry import KNOWN_GOOD, SCHEMES, fields, find, load_all
from testbed.configuration.schema import DATA_KEYS, OPTIM_KEYS, RUN_KEYS
from testbed.errors import NoServerError


def has_server(network: dict) -> bool | None:
    """Whether the `[network]` topology has a server node (None: a graph file; the loop
    checks it once the graph is read)."""
    topology = network.get("topology")
    return None if topology == "file" else topology != "ring"


def collective(method: str, given: str | None, network: dict) -> str | None:
    """The collective a method uses on this topology: the one the file names, else the method's
    first that the topology can carry (a ring has no server, so no 'ps'); None: the default."""
    if has_server(network) is not False:
        return given
    if given == "ps":
        raise NoServerError("compression.collective", given,
                          message=ps_without_server(method, network.get("topology")))
    if given is not None:
        return given
    serverless = [c for c in SCHEMES[method].collectives if c != "ps"]
    if not serverless:
        raise NoServerError("compression.method", method,
                          message=ps_without_server(method, network.get("topology")))
    return serverless[0]


def ps_without_server(method: str, topology) -> str:
    """One line for a parameter-server exchange asked of a topology without a server."""
    load_all()
    head = (f"compression.collective 'ps' (method {method!r}) needs a parameter server, but "
            f"network.topology {topology!r} has no server node; ")
    others = [c for c in SCHEMES[method].collectives if c != "ps"]
    if others:
        return head + (f"set compression.collective to {' or '.join(repr(c) for c in others)}, or use a "
                       f"topology with a server (star, mesh, geometric)")
    serverless = sorted(n for n, c in SCHEMES.items() if set(c.collectives) - {"ps"})
    head = (f"compression.method {method!r} needs a parameter server, but network.topology "
            f"{topology!r} has no server node; ")
    return head + (f"{method!r} only exchanges through a server: use a topology with one (star, "
                   f"mesh, geometric) or a method that needs none ({', '.join(serverless)})")


def switch_to_known_good(raw: dict, file_method: str, given: set[str], notes: list[str]) -> dict:
    """On a file written for another method (`--set compression.method=NAME`), the method's
    known-good values (registry.KNOWN_GOOD) replace the file's, except keys set on the command
    line; one line per key replaced appended to `notes`."""
    comp = raw.get("compression")
    method = comp.get("method", "none") if isinstance(comp, dict) else None
    if method == file_method or not (isinstance(method, str) and find(method)):
        return raw
    tables = {"run": RUN_KEYS, "data": DATA_KEYS, "optim": OPTIM_KEYS, "compression": fields(method)}
    for path, value in KNOWN_GOOD[method].items():
        section, key = path.split(".", 1)
        table = raw.setdefault(section, {})
        if path in given or not isinstance(table, dict):
            continue
        field = tables[section].get(key)
        whose = f"the file's, written for {file_method!r}" if key in table else "the default"
        had = table.get(key, None if field is None else field.default)
        if had == value:
            continue
        table[key] = value
        notes.append(f"note: {path} = {had!r} ({whose}) replaced by "
                     f"{value!r}, {method}'s known-good value; --set {path}=... to choose another")
    return raw
