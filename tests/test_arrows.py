"""The rooms' arrows point one way: `lgc_schema` imports nothing of ours, `channels` never loads
torch, nodes or testbed, `nodes` never loads channels, the CLI starts without torch (checked in a
fresh interpreter). And no import cycle hides in a function body: the import graph of our
packages, function-level imports counted, has no cycle, and an import inside a function is one
of the few listed in LAZY, each keeping a heavy package off a path that must not load it.

The graph is read from the source (ast): `import x` / `from x import y` anywhere in a module,
except under `if TYPE_CHECKING:` (never run). Plugins loaded by name through importlib (the CLI's
commands, the registry's methods, the benchmarks) are not edges: the loader is complete before
it loads them.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("lgc_schema", "channels", "nodes", "testbed", "dashboards", "experiments", "benchmarks",
            "validation")
# What a path that must start quickly (the CLI's parser) must not load: each takes about a second
# or more to import here (torch ~5 s, sklearn ~3 s, dash ~1.5 s, numba ~1 s; plotly is dash's).
HEAVY = ("torch", "sklearn", "tensorboard", "dash", "plotly", "numba", "ray", "flwr",
         "networkx",   # networkx: 0.15 s of the link layer's 0.27 s import
         "optuna")     # 0.1-0.4 s, and an optional extra (`testbed tune` only)

CASES = {
    "lgc_schema": ("import lgc_schema", ["channels", "nodes", "testbed", "torch"]),
    "channels": ("import channels.config, channels.network, channels.topology",
                 ["nodes", "testbed", "torch"]),
    "nodes": ("import nodes.compression.registry as r; r.load_all(); import nodes.data, nodes.federated",
              ["channels", "testbed", "simpy"]),
    # `testbed --help` and every command's argument parsing: the commands load the heavy rooms
    # only inside their main()
    "cli": ("import testbed.cli as c; c.build_parser()", list(HEAVY)),
    # a run of the quickstart: no compiler stack (the optimizer and the FLOP counter do
    # without torch._dynamo, a second), no dashboard, no other frameworks, no method but its
    # own (topk: the registry imports a method's file when it is named)
    "run": ("import tempfile, testbed.cli as c; c.main(['run', 'experiments/quickstart.toml', "
            "'--quiet', '--store', tempfile.mkdtemp() + '/r.db', '--set', 'run.iterations=2'])",
            ["torch._dynamo", "sklearn", "tensorboard", "dash", "numba", "ray", "flwr",
             "nodes.compression.dgc", "nodes.compression.lgc_common", "nodes.compression.powersgd",
             "nodes.compression.qsgd", "nodes.compression.none"]),
}

# The function-level imports that stay, as (file, our module or another package): why. Each one
# loads a HEAVY package (checked below, so that an entry cannot go stale); every other import is
# at the top of its module.
LAZY = {
    ("experiments/results/provenance.py", "nodes.compression.registry"):
        "torch: a run file's effective options only when one is written",
    # a sweep loads Ray only with --ray, and the experiment only inside a Ray task
    ("testbed/sweeps.py", "ray"): "ray: only `testbed sweep --ray`",
    ("testbed/sweeps.py", "testbed.experiment"):
        "torch: the thread policy inside a Ray task or a forked worker (preloaded there)",
    # plotly and a headless Chromium: only `make validate-ns3 FIGURE=...` draws the walk
    ("validation/ns3/walk.py", "plotly"): "plotly: only the figure",
    ("validation/ns3/walk.py", "dashboards.export"): "plotly, Chromium: only the figure",
    ("testbed/cli.py", "dashboards.app"): "dash: only `testbed dashboard` serves it",
    ("testbed/commands/tune.py", "testbed.tune.study"):
        "optuna: only `testbed tune` runs a study (and says which extra to install without it)",
    ("testbed/cli.py", "dashboards.export"): "plotly: only `testbed export --format html|png`",
    ("testbed/commands/methods.py", "nodes.compression.registry"):
        "torch: the methods' modules; the parser registers `methods` without them",
    ("testbed/commands/keys.py", "testbed.configuration.keys"):
        "torch: the data sets' and the methods' Fields; the parser registers `keys` without them",
    ("nodes/data.py", "sklearn"): "3 s to import; only the digits and synthetic datasets use it",
    # the loader is loaded by the CLI's parser (probe, sweep and resume import it); the section
    # checks and the method policy sit on the rooms behind [data], [model] and [compression],
    # which load torch, so the loader imports them when it validates a file
    ("testbed/configuration/loading.py", "testbed.configuration.sections"):
        "torch: the [data], [model] and [compression] checks",
    ("testbed/configuration/loading.py", "testbed.configuration.method_policy"):
        "torch: the methods' collectives and known-good values",
    # numba's compiled engines: a CSMA cell and multi-hop routes only (0.15 s of a start-up)
    ("channels/fast.py", "channels.csma_fast"): "numba: the DCF engine of a CSMA cell",
    ("channels/network.py", "channels.relay"): "numba: the relay engine of multi-hop routes",
    # the link layer (channels.network: networkx, simpy, scipy): only when a command runs it
    ("testbed/commands/probe.py", "testbed.emulation.edge_network"): "networkx: the probe runs the link layer",
    ("testbed/distributed/launcher.py", "testbed.emulation.edge_network"): "networkx: the launcher counts the workers",
    # torch: the run and resume commands load the experiment only when they run
    ("testbed/api.py", "testbed.experiment"): "torch: the experiment",
    ("testbed/api.py", "nodes.compression.base"): "torch: GradientError's room",
    ("testbed/api.py", "torch"): "the model object's type is checked only when one is given",
    # flwr, torch: `testbed flower run` loads Flower and the emulated grid only when it runs
    ("testbed/commands/flower.py", "testbed.flower.launch"): "flwr, torch: the Flower run",
    ("testbed/flower/launch.py", "testbed.flower.ray_pool"):
        "ray: ClientApps on Ray actors only with a Ray option or a GPU share",
    ("testbed/run/checkpoint.py", "torch"): "`testbed resume` reads checkpoint paths before any torch",
    ("testbed/records/tensorboard_export.py", "torch"):
        "torch.utils.tensorboard needs the optional tensorboard package: one line names it if missing",
}


# testbed's rooms, top first: a module imports only from its own room or the rooms below it
# (nodes, channels and lgc_schema lie below them all). The first room whose names match a module
# (the name itself or a package prefix) holds it. Below the experiment a room is a folder; the
# flat modules are the entry points, the Python API, the experiment and the shared vocabulary.
ROOMS = (
    ("entry", ("testbed.cli", "testbed.commands", "testbed.launch", "testbed.sweeps",
               "testbed.reference", "testbed.tune")),
    ("python api", ("testbed.api",)),
    ("torchrun", ("testbed.distributed",)),
    ("experiment", ("testbed.experiment",)),
    ("drivers", ("testbed.drivers", "testbed.flower")),
    ("run", ("testbed.run",)),
    ("records", ("testbed.records",)),
    ("emulation and configuration", ("testbed.emulation", "testbed.configuration",
                                     "testbed.paths", "testbed.runspec")),
    ("errors and processes", ("testbed.errors", "testbed.processes", "testbed")),
)
# The modules directly in testbed/ (its folders hold the rest).
FLAT = {"__init__", "api", "cli", "errors", "experiment", "launch", "paths", "runspec", "sweeps"}


def room_of(module: str) -> int:
    """The index of `module`'s room in ROOMS (0 is the top)."""
    return next(i for i, (_, names) in enumerate(ROOMS)
                if any(module == n or module.startswith(n + ".") for n in names))


@dataclass(frozen=True)
class Import:
    source: str        # importing module
    target: str        # imported module (ours or not)
    where: str         # file:line
    in_function: bool


def our_modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return mods


def imports_of(module: str, path: Path, mods: dict[str, Path]) -> list[Import]:
    """Every import the module can run, `from pkg import sub` resolved to the submodule."""
    rel = path.relative_to(ROOT).as_posix()
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            children = node.orelse  # the body is for the type checker only
        else:
            children = list(ast.iter_child_nodes(node))
        if isinstance(node, ast.Import):
            found.extend(Import(module, a.name, f"{rel}:{node.lineno}", in_function)
                         for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[:len(package) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.append(Import(module, sub if sub in mods else base,
                                    f"{rel}:{node.lineno}", in_function))
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in children:
            visit(child, inner)

    visit(ast.parse(path.read_text(), rel), False)
    return found


def ours(name: str) -> bool:
    return name.split(".")[0] in PACKAGES


@pytest.fixture(scope="module")
def graph():
    mods = our_modules()
    return mods, [imp for m, p in mods.items() for imp in imports_of(m, p, mods)]


@pytest.mark.parametrize("room", sorted(CASES))
def test_room_does_not_load_what_it_must_not(room):
    code, banned = CASES[room]
    probe = (f"import sys; {code}; "
             f"print(sorted(b for b in {banned!r} "
             f"if any(m == b or m.startswith(b + '.') for m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = out.stdout.strip().splitlines()[-1]     # after what the code itself prints
    assert loaded == "[]", f"{room} loads {loaded}"


def test_every_import_of_ours_resolves_to_a_module(graph):
    mods, imports = graph
    lost = [f"{i.where}: {i.target}" for i in imports if ours(i.target) and i.target not in mods]
    assert not lost, "imports of our modules that the graph cannot place:\n" + "\n".join(lost)


def test_no_import_cycle_counting_function_level_imports(graph):
    mods, imports = graph
    g = nx.DiGraph()
    for i in imports:
        if i.target in mods and i.target != i.source:
            g.add_edge(i.source, i.target, where=i.where)
    cycles = []
    for scc in nx.strongly_connected_components(g):
        if len(scc) > 1:
            edges = nx.find_cycle(g.subgraph(scc))
            cycles.append(" -> ".join(f"{u} ({g.edges[u, v]['where']})" for u, v in edges)
                          + f" -> {edges[0][0]}")
    assert not cycles, "import cycles (each arrow at the file:line that imports):\n" + "\n".join(cycles)


def test_testbed_imports_run_one_way_down_its_rooms(graph):
    mods, imports = graph
    up = [f"{i.where}: {i.source} ({ROOMS[room_of(i.source)][0]}) imports {i.target} "
          f"({ROOMS[room_of(i.target)][0]})"
          for i in imports if i.source.startswith("testbed") and i.target.startswith("testbed")
          and i.target in mods and room_of(i.target) < room_of(i.source)]
    assert not up, "imports running back up testbed's rooms:\n" + "\n".join(up)


def lazy_key(i: Import) -> tuple[str, str]:
    """(file, module) as LAZY lists it: our module by its full name, another by its package."""
    return i.where.split(":")[0], i.target if ours(i.target) else i.target.split(".")[0]


def test_function_level_imports_are_only_the_listed_ones(graph):
    mods, imports = graph
    bad = sorted({(i.where, i.target) for i in imports if i.in_function
                  and lazy_key(i) not in LAZY})
    per_file: dict[str, list[str]] = {}
    for where, target in bad:
        per_file.setdefault(where.split(":")[0], []).append(f"{where} {target}")
    assert not per_file, (f"{len(bad)} function-level imports outside LAZY (move them to the top, "
                          "or list them in LAZY with the heavy package they keep away):\n"
                          + "\n".join(f"{f} ({len(v)}): " + ", ".join(v) for f, v in per_file.items()))


def test_each_lazy_import_exists_and_keeps_a_heavy_package_away(graph):
    mods, imports = graph
    top: dict[str, set[str]] = {}
    for i in imports:
        if not i.in_function:
            top.setdefault(i.source, set()).add(i.target)

    def loads(module: str) -> set[str]:
        """The HEAVY packages importing `module` loads (our modules' top-level imports followed)."""
        seen, todo, found = set(), [module], set()
        while todo:
            m = todo.pop()
            if m in seen:
                continue
            seen.add(m)
            if m.split(".")[0] in HEAVY:
                found.add(m.split(".")[0])
            todo.extend(t for t in top.get(m, ()) if t in mods or t.split(".")[0] in HEAVY)
        return found

    used = {lazy_key(i) for i in imports if i.in_function}
    stale = [f"{f} {m}: not imported in a function there" for f, m in LAZY if (f, m) not in used]
    stale += [f"{f} {m}: loads none of {HEAVY}" for f, m in LAZY if not loads(m)]
    assert not stale, "LAZY entries to delete (and their imports to move to the top):\n" + "\n".join(stale)


def test_no_module_of_testbed_forwards_names_it_does_not_declare():
    """A part is reached by its declared name (`exp.driver.model`), never looked up by
    `__getattr__` in whatever object happens to have it."""
    found = [f"{p.relative_to(ROOT)}:{n.lineno}" for p in sorted((ROOT / "testbed").rglob("*.py"))
             for n in ast.walk(ast.parse(p.read_text()))
             if isinstance(n, ast.FunctionDef) and n.name == "__getattr__"]
    assert not found, "__getattr__ in testbed/: " + ", ".join(found)


def test_testbed_has_few_flat_modules_and_each_folder_is_a_room():
    """testbed/ holds at most 10 modules of its own (FLAT); every other module is in a folder
    that one room names whole, so the folders are the map."""
    flat = {p.stem for p in (ROOT / "testbed").glob("*.py")}
    assert flat == FLAT and len(FLAT) <= 10, f"flat modules in testbed/: {sorted(flat)}"
    folders = sorted(p.parent.name for p in (ROOT / "testbed").glob("*/__init__.py"))
    named = {n.split(".")[1] for _, names in ROOMS for n in names if n.count(".") == 1}
    assert set(folders) <= named, f"folders of testbed/ no room names: {sorted(set(folders) - named)}"
