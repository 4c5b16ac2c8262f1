"""``delaybound theory {list,show,check,latex,eval,tune}``: the checked theorems from the shell.

- ``theory list``: every theorem with its parameters.
- ``theory show NAME``: statement, assumptions, parameter domains, bound, proof steps.
- ``theory check [NAME ...]``: decide/confirm every proof step; exit code 1 if any step is not
  proved or confirmed (``--json``: ``{"ok", "theorems": [{"name", "ok", "steps": [...]}]}``).
- ``theory latex NAME``: the guarantee in LaTeX (matplotlib mathtext compatible).
- ``theory eval NAME k=v ...``: the bound at the given parameters (``--json``: ``{"bound": x}``).
- ``theory tune NAME eps=... [K=...] k=v ...``: the tuned corollary (parameters, K, bound).

Bad input (unknown theorem or parameter, malformed ``k=v``, out-of-domain values) raises
``ValueError``/``TypeError``; the dispatcher prints one line on stderr and exits with code 2.
"""

from __future__ import annotations

import argparse
import re

from delaybound.output import UsageError, print_json

__all__ = ["register", "parse_assignments"]

_INT = re.compile(r"^[+-]?\d+$")


def register(subparsers) -> None:
    """Add the ``theory`` command and its subcommands."""
    theory = subparsers.add_parser(
        "theory", help="checked delay-dependent convergence bounds (list, show, check, latex, "
                       "eval, tune)",
        description="Delay-dependent convergence bounds as checked sympy objects.")
    sub = theory.add_subparsers(dest="theory_command", metavar="SUBCOMMAND",
                                parser_class=type(theory))
    sub.required = True

    p = sub.add_parser("list", help="list the theorems")
    _json(p)
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser("show", help="statement, assumptions, domains, bound and proof steps")
    p.add_argument("name", help="theorem name (see 'theory list')")
    _json(p)
    p.set_defaults(func=_cmd_show)

    p = sub.add_parser("check", help="decide every algebra step, confirm every analytic step")
    p.add_argument("names", nargs="*", metavar="NAME", help="theorems to check (default: all)")
    p.add_argument("--instances", type=int, default=None,
                   help="random instances per geometry for analytic steps (default: 48)")
    p.add_argument("--seed", type=int, default=0, help="instance seed (default: 0)")
    _json(p)
    p.set_defaults(func=_cmd_check)

    p = sub.add_parser("latex", help="the guarantee in LaTeX")
    p.add_argument("name", help="theorem name")
    _json(p)
    p.set_defaults(func=_cmd_latex)

    p = sub.add_parser("eval", help="evaluate the bound: theory eval NAME k=v ...")
    p.add_argument("name", help="theorem name")
    p.add_argument("assignments", nargs="*", metavar="k=v", help="parameter values")
    _json(p)
    p.set_defaults(func=_cmd_eval)

    p = sub.add_parser("tune", help="tuned corollary: theory tune NAME eps=... [K=...] k=v ...")
    p.add_argument("name", help="theorem name")
    p.add_argument("assignments", nargs="*", metavar="k=v",
                   help="eps and/or K, and the problem constants")
    _json(p)
    p.set_defaults(func=_cmd_tune)


def _json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def parse_assignments(items: list[str]) -> dict[str, object]:
    """``["K=10", "eta=0.1"] -> {"K": 10, "eta": 0.1}``; values that are not numbers are kept as
    strings so that the theorem's validation names the parameter and its domain."""
    out: dict[str, object] = {}
    for item in items:
        if item.count("=") != 1:
            raise UsageError(f"expected k=v, got {item!r}")
        key, raw = (part.strip() for part in item.split("="))
        if not key:
            raise UsageError(f"missing parameter name in {item!r}")
        if key in out:
            raise UsageError(f"parameter {key!r} given twice")
        if _INT.match(raw):
            out[key] = int(raw)
        else:
            try:
                out[key] = float(raw)
            except ValueError:
                out[key] = raw
    return out


def _theorem(name: str):
    from theory import get_theorem

    return get_theorem(name)


def _cmd_list(args) -> int:
    from theory import THEOREMS

    rows = [{"name": th.name, "title": th.title, "parameters": list(th.parameters),
             "module": th.module, "proof_md": th.proof_md} for th in THEOREMS.values()]
    if args.json:
        print_json({"theorems": rows})
    else:
        width = max(len(r["name"]) for r in rows)
        for r in rows:
            print(f"{r['name']:<{width}}  {r['title']}")
            print(f"{'':<{width}}  parameters: {', '.join(r['parameters'])}")
    return 0


def _cmd_show(args) -> int:
    th = _theorem(args.name)
    info = {
        "name": th.name, "title": th.title, "statement": th.statement,
        "assumptions": list(th.assumptions), "parameters": th.parameter_table(),
        "conditions": [f"{c.text()} ({c.description})" for c in th.conditions],
        "bound": str(th.bound), "latex": th.latex(),
        "extras": {k: str(v) for k, v in th.extras.items()},
        "tuning": th.tuning.description if th.tuning else None,
        "module": th.module, "proof_md": th.proof_md, "reference": th.reference,
        "steps": [{"id": s.id, "kind": s.kind, "claim": s.claim,
                   "justification": s.justification, "predicate": s.predicate}
                  for s in th.proof.steps],
    }
    if args.json:
        print_json(info)
        return 0
    print(f"{th.name}: {th.title}\n\n{th.statement}\n")
    print("Assumptions:\n" + "\n".join(f"  - {a}" for a in th.assumptions))
    print("Parameters:\n" + "\n".join(f"  {p['name']:<10} {p['domain']}"
                                      for p in info["parameters"]))
    for c in info["conditions"]:
        print(f"Condition: {c}")
    print(f"Bound: {info['bound']}")
    if info["tuning"]:
        print(f"Tuned: {info['tuning']}")
    print(f"Proof ({th.proof_md}, encoded in {th.module}):")
    for s in th.proof.steps:
        print(f"  {s.id:<4} {s.kind:<9} {s.claim}\n{'':7}{'':9} [{s.justification}]")
    return 0


def _cmd_check(args) -> int:
    from theory import THEOREMS, get_theorem
    from theory.proof import DEFAULT_INSTANCES

    instances = DEFAULT_INSTANCES if args.instances is None else args.instances
    if instances < 1:
        raise UsageError(f"--instances={instances} must be >= 1")
    theorems = [get_theorem(n) for n in args.names] if args.names else list(THEOREMS.values())
    reports = [th.proof.check(instances=instances, seed=args.seed) for th in theorems]
    ok = all(r.ok for r in reports)
    if args.json:
        print_json({"ok": ok, "theorems": [r.to_dict() for r in reports]})
    else:
        for r in reports:
            counts = {}
            for s in r.steps:
                counts[s.status] = counts.get(s.status, 0) + 1
            summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
            print(f"{'ok  ' if r.ok else 'FAIL'} {r.theorem}: {len(r.steps)} steps ({summary})")
            for s in r.steps:
                if s.status == "failed":
                    print(f"     {s.id} {s.kind}: {s.detail}")
        print("all steps proved or confirmed" if ok else "some steps FAILED")
    return 0 if ok else 1


def _cmd_latex(args) -> int:
    th = _theorem(args.name)
    if args.json:
        print_json({"name": th.name, "latex": th.latex()})
    else:
        print(th.latex())
    return 0


def _cmd_eval(args) -> int:
    th = _theorem(args.name)
    bound = th.evaluate(**parse_assignments(args.assignments))
    if args.json:
        print_json({"bound": bound})
    else:
        print(repr(bound))
    return 0


def _cmd_tune(args) -> int:
    th = _theorem(args.name)
    values = parse_assignments(args.assignments)
    result = th.tuned(K=values.pop("K", None), eps=values.pop("eps", None), **values)
    if args.json:
        print_json(result)
    else:
        print(f"eps = {result['eps']!r}, K = {result['K']}, bound = {result['bound']!r}")
        for name, value in result["parameters"].items():
            print(f"  {name:<10} {value!r}")
    return 0
