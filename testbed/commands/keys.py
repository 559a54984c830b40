"""`testbed keys [SECTION|KEY]`: every key an experiment file accepts, as `testbed methods`
prints methods: one line per key, beginning with its full dotted name, or one key whole (its
type, default, what is allowed and its help). Read from the tables that validate files
(testbed.configuration.keys), so it says what a file may contain without reading the source."""
from __future__ import annotations

from testbed.errors import UserError


def register(sub) -> None:
    p = sub.add_parser("keys", help="list the experiment-file keys, or one key whole",
                       description="Every key an experiment file accepts: type, default, what is "
                                   "allowed, help. A section (run, network.link, compression, ...) "
                                   "lists its keys; a key (network.link.bandwidth_mbps) prints it whole.")
    p.add_argument("name", nargs="?", metavar="SECTION|KEY",
                   help="a section (its keys and the sections under it) or one dotted key")
    p.set_defaults(func=main)


def line(key, widths: tuple[int, int, int]) -> str:
    nw, tw, dw = widths
    scope = f"  [{key.scope}]" if key.scope else ""
    text = f"{key.name:<{nw}}  {key.type_text():<{tw}}  default {key.default_text():<{dw}}  " \
           f"{key.field.allowed()}{scope}"
    return f"{text}  - {key.field.help}" if key.field.help else text


def listing(keys, overrides: dict[str, str]) -> list[str]:
    """One line per key; after a node's or one link's section, the line for the link keys it
    may override (`overrides`: testbed.configuration.keys.LINK_OVERRIDES)."""
    widths = (max(len(k.name) for k in keys), max(len(k.type_text()) for k in keys),
              max(len(k.default_text()) for k in keys))
    out, section = [], None
    for k in keys:
        if k.section != section:
            if section in overrides:
                out.append(overrides_line(section, overrides[section]))
            section = k.section
        out.append(line(k, widths))
    if section in overrides:
        out.append(overrides_line(section, overrides[section]))
    return out


def overrides_line(section: str, what: str) -> str:
    return f"{section}.<any network.link key>  overrides it for {what}"


def whole(keys) -> list[str]:
    out = []
    for k in keys:
        if out:
            out.append("")
        out += [k.name + (f"  [{k.scope}]" if k.scope else ""),
                f"  type: {k.type_text()}", f"  default: {k.default_text()}",
                f"  allowed: {k.field.allowed()}", f"  help: {k.field.help}"]
        if k.field.old_names:
            out.append(f"  old names, still read this release: {', '.join(k.field.old_names)}")
        if k.section == "network.link":
            out.append(f"  also per node ([network.nodes.NAME] {k.leaf} = ...) and per link "
                       f"([[network.links]] {k.leaf} = ...)")
    return out


def main(args) -> int:
    # deferred: torch (the data sets' and methods' Fields); the parser registers `keys` without
    from testbed.configuration.keys import LINK_OVERRIDES, catalog, closest, select

    keys = catalog()
    if not args.name:
        print("\n".join(listing(keys, LINK_OVERRIDES)))
        return 0
    chosen = select(args.name, keys)
    if not chosen:
        near = closest(args.name, keys)
        hint = f"; closest: {', '.join(near)}" if near else ""
        raise UserError(f"keys: no key or section {args.name!r}{hint} (`testbed keys` lists them all)")
    exact = all(k.name == args.name.strip() for k in chosen)
    print("\n".join(whole(chosen) if exact else listing(chosen, LINK_OVERRIDES)))
    return 0
