"""`testbed methods [NAME]`: the registered compression methods, their collectives, their
options (type, default, what is allowed, help) and where each comes from (built in, or another
package's entry point), read from the registry and its schema Fields: what `[compression]`
accepts, without reading the source."""
from __future__ import annotations

import difflib
import re
import sys

from testbed.errors import UserError


def register(sub) -> None:
    p = sub.add_parser("methods", help="list the compression methods, or one method's options")
    p.add_argument("name", nargs="?", help="a method: its collectives and every option")
    p.set_defaults(func=main)


# A reference to the code ("templates.DenseScheme") in a docstring: for the source's reader,
# not the user's; left out of what the command prints.
CODE_REF = re.compile(r"\s*\((?:[a-z_]+\.)+[A-Z]\w*\)|(?:[a-z_]+\.)+[A-Z]\w*;\s*")


def summary(cls) -> str:
    """The first sentence of the method's module docstring (else its class's), without the
    leading "`name`:" and without references to the code."""
    doc = sys.modules[cls.__module__].__doc__ or cls.__doc__ or ""
    text = " ".join(doc.split()).split(". ")[0].rstrip(".")
    return CODE_REF.sub("", text.removeprefix(f"`{cls.name}`: "))


def type_name(field) -> str:
    return " or ".join(t.__name__ for t in field.types)


def collectives_text(cls) -> str:
    """The collectives, the default (the first) marked: "ps (default), allgather"."""
    first, *rest = cls.collectives
    return ", ".join([f"{first} (default; on a ring the first that is not ps)" if rest and first == "ps"
                      else f"{first} (default)", *rest])


def listing() -> list[str]:
    # deferred: torch (the methods' modules); the parser registers `methods` without
    from nodes.compression.registry import METHODS, SCHEMES, names, origin

    out = []
    width = max(map(len, names()))
    for name in names():
        out.append(f"{name:<{width}}  {', '.join(SCHEMES[name].collectives):<24}  "
                   f"{summary(SCHEMES[name])}")
        opts = [k for k in METHODS[name] if k != "collective"]
        out.append(f"{'':<{width}}  options: {', '.join(opts) or '-'}")
        out.append(f"{'':<{width}}  from: {origin(name)}")
    out.append("`testbed methods NAME` lists a method's options: type, default, allowed values, help")
    return out


def details(name: str) -> list[str]:
    # deferred: torch (the methods' modules); the parser registers `methods` without
    from nodes.compression.registry import KNOWN_GOOD, METHODS, SCHEMES, names, origin

    if name not in names():
        close = difflib.get_close_matches(name, names(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UserError(f"methods: no method {name!r}{hint}; known: {', '.join(names())}")
    cls = SCHEMES[name]
    out = [f"{name}: {summary(cls)}",
           f"collectives: {collectives_text(cls)}", f"from: {origin(name)}",
           "options ([compression] KEY = VALUE):"]
    rows = []
    for key, field in METHODS[name].items():
        default = "required" if field.required else repr(field.default)
        rows.append((key, type_name(field), default, field.allowed(), field.help,
                     ", ".join(field.old_names)))
    kw = max(len(r[0]) for r in rows)
    tw = max(len(r[1]) for r in rows)
    dw = max(len(r[2]) for r in rows)
    for key, typ, default, allowed, help_, old in rows:
        line = f"  {key:<{kw}}  {typ:<{tw}}  default {default:<{dw}}  {allowed}"
        if help_:
            line += f"  - {help_}"
        if old:
            line += f" (old name, deprecated: {old})"
        out.append(line)
    if KNOWN_GOOD.get(name):
        pairs = ", ".join(f"{k} = {v!r}" for k, v in KNOWN_GOOD[name].items())
        out.append(f"known-good values, set when --set compression.method={name} switches a file "
                   f"written for another method: {pairs}")
    return out


def main(args) -> int:
    print("\n".join(details(args.name) if args.name else listing()))
    return 0
