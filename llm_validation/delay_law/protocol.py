"""The delay-law ledger's protocol: every rule that decides a verdict, written and committed
before the runs it judges.

:func:`protocol_doc` builds it from the checkout (the design's cells, seeds and lr profiles,
the run recipe, the statements and their gatekeeping graph, the level, the candidate laws and
the rule that chooses among them, the paper's thresholds and batch laws); :func:`write` puts
it in a ledger folder with its digest, the commit and the digest of the decision code;
:func:`check` refuses to assemble a folder whose recorded rules are not the checkout's
(``ProtocolMismatch``) unless asked for a labelled re-analysis.

A test compares the committed protocol (``docs/delay_law/protocol.json``) with
:func:`protocol_doc`, so a rule cannot change silently after the runs started.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Mapping

from llm_validation.records.atomic_io import write_json
from llm_validation.claims.report.protocol import ProtocolMismatch, digest
from llm_validation.claims.decide.regime import PAPER_MODELS, PAPER_NATS, compute_lag_fraction
from llm_validation.delay_law import design, laws, runs
from llm_validation.delay_law.batch_laws import BATCH_LAWS
from llm_validation.delay_law.verdicts import ALPHA, PAPER_LAG, PRIMARY, statements
from llm_validation.records.provenance import git_commit
from llm_validation.records.atomic_io import read_json

__all__ = ["PROTOCOL_FILE", "DECISION_CODE", "protocol_doc", "code_digest", "write",
           "markdown", "check"]

PROTOCOL_FILE = "protocol.json"
#: The files whose code decides a verdict (relative to the ``llm_validation`` package).
DECISION_CODE = ("delay_law/design.py", "delay_law/runs.py", "delay_law/measure.py",
                 "delay_law/laws.py", "delay_law/verdicts.py", "delay_law/paper.py",
                 "delay_law/batch_laws.py", "validation/envelope.py", "validation/graphical.py",
                 "validation/permutation.py", "validation/inference.py",
                 "validation/student.py")


def code_digest() -> str:
    """SHA-256 over :data:`DECISION_CODE`; ``FileNotFoundError`` on a missing file (a
    relayout must update the list, not silently change the digest)."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for rel in DECISION_CODE:
        p = root / rel
        if not p.is_file():
            raise FileNotFoundError(f"decision code {p} is missing: update DECISION_CODE")
        h.update(rel.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def protocol_doc() -> dict[str, Any]:
    """The checkout's rules (see the module docstring)."""
    cells = design.cells()
    sizes = [s for s in design.SIZES]
    ef_sizes = [c.size for c in cells if c.role == "shared" and "adamw/2bw+ef" in c.arms]
    stmts = statements(sizes, ef_sizes)
    return {
        "kind": "delay-law",
        "design": {
            "sizes": {s: design.preset(s).n_params() for s in sizes},
            "tokens_per_param": design.TOKENS_PER_PARAM, "seq_len": design.SEQ_LEN,
            "microbatches": design.MICROBATCHES, "shared_steps": design.SHARED_STEPS,
            "long_steps": design.LONG_STEPS, "seeds": list(design.SEEDS),
            "cells": [{"name": c.name, "size": c.size, "steps": c.steps, "batch": c.batch,
                       "role": c.role, "lr_multiple": c.lr_multiple, "arms": list(c.arms),
                       "frontier": [list(f) for f in c.frontier], "held_out": c.held_out}
                      for c in cells],
            "lr_profiles": {"multiples": list(design.LR_MULTIPLES),
                            "seeds": list(design.LR_SEEDS), "centres": runs.LR_CENTRES,
                            "steps": design.SHARED_STEPS,
                            "rule": "each size's lr per optimizer: the profile point with the "
                                    "lowest mean closing loss over its seeds"},
            "estimated_process_hours": {k: round(v / 3600, 2) for k, v in design.cost().items()},
        },
        "recipe": {"modes": {m: list(v) for m, v in runs.MODES.items()},
                   "warmup_fraction": runs.WARMUP_FRACTION, "stats_evals": runs.STATS_EVALS,
                   "curve_evals": runs.CURVE_EVALS, "final_eval_tokens": design.FINAL_EVAL_TOKENS,
                   "schedule": "cosine", "weight_decay": 0.1, "ns_dtype": "float32",
                   "muon_aux_lr": "the size's chosen AdamW lr", "device": "cpu"},
        "phases": list(runs.PHASES),
        "held_out_rule": "the held-out cells train only after every candidate law's prediction "
                         "for them (fitted on the training cells) is written to "
                         "predictions.json and committed",
        "unit": {"lag": "compute-equivalent lag: 1 - s*/T on the frontier of synchronous runs "
                        "of the same seed at the cell's frontier fractions (own schedules), "
                        "linear in log steps", "gap_share": "gap / (L_0 - L_sync(T)) on the "
                        "fixed 1M-token validation set"},
        "statements": [{"id": s.id, "text": s.text, "rule": s.rule, "parent": s.parent,
                        "reading": s.reading} for s in stmts],
        "family": {"alpha": ALPHA, "primary": list(PRIMARY), "method": "graphical gatekeeping "
                   "(Bretz et al. 2009): primaries 1/m each; a primary with side readings "
                   "passes its weight to them; a side reading to its siblings and the other "
                   "primaries", "p_value": "two-sided one-sample t over seeds; sign-flip "
                   "p-value beside, never deciding", "direction": "a rejected statement passes "
                   "on its predicted side (above 0), fails on the other; the project's N- and "
                   "S- readings are two-sided and report their sign"},
        "paper": {"lag_threshold_135m": PAPER_LAG, "nats": PAPER_NATS,
                  "lag_at": {m: compute_lag_fraction(PAPER_NATS, n)
                             for m, n in PAPER_MODELS.items()},
                  "batch_laws": {k: vars(v) for k, v in BATCH_LAWS.items()},
                  "reading": "supported / contradicted only when both batch laws' 95% "
                             "intervals lie on one side of the model's threshold"},
        "laws": {"candidates": [law.name for law in laws.candidate_laws()],
                 "arms": ["adamw/2bw", "muon/2bw"], "quantities": ["lag", "gap_share"],
                 "hit_factor": laws.HIT_FACTOR, "tie_log_error": laws.TIE_LOG_ERROR,
                 "choice": "smallest mean held-out |log(pred/observed)|; a tie within "
                           "tie_log_error goes to fewer coefficients, then the first listed",
                 "intervals": "per-seed fits, Student-t over seeds"},
    }


def markdown(doc: Mapping[str, Any]) -> str:
    """``protocol.md``: the same rules for a reader."""
    d, fam = doc["design"], doc["family"]
    lines = [f"# Protocol of the delay-law ledger", "",
             f"Digest `{doc.get('digest', digest(doc))}`, commit "
             f"`{doc.get('commit') or 'unknown'}`. Every verdict of a ledger that records this "
             "digest was decided by these rules.", "", "## Design", "",
             f"Sizes {', '.join(f'{k} ({v:,})' for k, v in d['sizes'].items())}, "
             f"{d['tokens_per_param']:g} tokens per parameter, seeds {d['seeds']}, "
             f"lr profile seeds {d['lr_profiles']['seeds']} ({d['lr_profiles']['rule']}).", "",
             "| cell | role | steps | batch (x 64 bytes) | arms | frontier | held out |",
             "|---|---|---|---|---|---|---|"]
    for c in d["cells"]:
        lines.append(f"| {c['name']} | {c['role']} | {c['steps']} | {c['batch']} | "
                     f"{', '.join(c['arms'])} | {', '.join(f'{o} {f:g}' for o, f in c['frontier'])}"
                     f" | {'yes' if c['held_out'] else ''} |")
    lines += ["", f"Estimated cost (process-hours): {d['estimated_process_hours']}.", "",
              "## Decisions", "", f"- Unit: {doc['unit']['lag']}; gap share: "
              f"{doc['unit']['gap_share']}.", f"- Family: {fam['method']}, alpha "
              f"{fam['alpha']:g}; p-values: {fam['p_value']}; {fam['direction']}.",
              f"- Held-out cells: {doc['held_out_rule']}.",
              f"- Laws: {', '.join(doc['laws']['candidates'])}; {doc['laws']['choice']}; "
              f"intervals: {doc['laws']['intervals']}.",
              f"- The paper's setting: {doc['paper']['reading']}.", "", "## Statements", ""]
    for s in doc["statements"]:
        parent = f" (after {s['parent']})" if s["parent"] else " (primary)"
        lines.append(f"- **{s['id']}**{parent}, {s['reading']}: {s['text']}. Rule: {s['rule']}.")
    return "\n".join(lines) + "\n"


def write(out: str | Path) -> dict[str, Any]:
    """Write the checkout's protocol into ``out`` (json and md); returns it."""
    doc = protocol_doc()
    full = {**doc, "digest": digest(doc), "commit": git_commit(), "code_digest": code_digest()}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / PROTOCOL_FILE, full)
    (out / "protocol.md").write_text(markdown(full))
    return full


def check(out: str | Path, reanalyse: bool = False) -> dict[str, Any]:
    """The recorded protocol of ``out`` against the checkout's: ``{"digest", "reanalysis"}``;
    ``ProtocolMismatch`` when they differ and ``reanalyse`` is False; ``FileNotFoundError``
    when ``out`` has none (a ledger without a protocol committed first is exploratory)."""
    path = Path(out) / PROTOCOL_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: write and commit the protocol before the "
                                "runs (delaybound delay-law protocol)")
    recorded, now = read_json(path), digest(protocol_doc())
    if recorded.get("digest") == now:
        return {"digest": now, "reanalysis": None,
                "code_changed": recorded.get("code_digest") != code_digest()}
    if not reanalyse:
        raise ProtocolMismatch(f"{path} records protocol {str(recorded.get('digest'))[:12]}, "
                               f"this checkout's rules are {now[:12]}: pass --reanalyse to "
                               "assemble under the current rules as a labelled re-analysis")
    return {"digest": now, "reanalysis": {"recorded": recorded.get("digest")}}
