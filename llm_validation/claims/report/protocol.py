"""The ledger's protocol: every rule that decides its verdicts, written down before the runs.

A protocol is a plain JSON document built from the registry and the decision constants (it
reads them, it never restates them): per claim its central statement, side readings and the
project's readings with their rules, the grid and the arms with their config changes, the
seeds; the family-wise rule (gatekeeping at :data:`FAMILY_ALPHA` over the leaf checks of the
paper's statements, the central ones first; Benjamini-Hochberg, the per-check decisions and
the sign-flip p-values beside it); the margins and
thresholds in their scale-free unit; the seeds policy; the lr sweep's rule; and the scale (its
base run, warmup, the AdamW part's lr).

Algorithm
    :func:`protocol` builds the document for a scale; :func:`digest` is the SHA-256 of its
    canonical JSON (sorted keys, no whitespace). ``reproduce --protocol --out DIR`` writes
    ``DIR/protocol.json`` (with the digest and the git commit it was written at) and
    ``DIR/protocol.md``; ``reproduce --out DIR`` writes them when ``DIR`` has none, records
    the digest in ``claims.json`` and, when ``DIR`` already holds a protocol whose digest
    differs from the rules of this checkout, refuses to assemble (:class:`ProtocolMismatch`,
    exit 2) unless ``--reanalyse``, which assembles under the current rules and labels the
    ledger a re-analysis (the recorded protocol is kept, the new one is written beside it).

Guarantee
    Two checkouts assemble a ledger the same way iff their protocols have the same digest
    (as far as the rules are data: the decision code's own files are hashed too and a change
    is reported, ``code_digest``, without refusing, since a refactor changes them).

Reference
    Issue 26 (pre-registration of the ledger's rules); the practice of a statistical analysis
    plan fixed before unblinding (e.g. ICH E9).
"""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from llm_validation.claims.catalogue.registry import CLAIMS
from llm_validation.claims.catalogue.registry import thresholds as catalogue_thresholds
from llm_validation.claims.record.claim import Claim
from llm_validation.claims.decide.decisions import FAMILY_ALPHA
from llm_validation.claims.plan.lr_sweep import (FIRST_GRID, LR_RATIO, MAX_WIDEN, SWEEP_SEEDS,
                                                 sweep_seeds)
from llm_validation.claims.decide.regime import (CHINCHILLA_FIT, PAPER_LAG_FRACTION, PAPER_MODELS,
                                          PAPER_NATS, compute_lag_fraction)
from llm_validation.claims.plan.scales import Scale, base_config
from llm_validation.claims.decide.sequential import SeedPolicy
from llm_validation.claims.sizes.fit import CONFOUND, EXPONENT_NAME
from llm_validation.claims.decide.decisions import CLAIM_RULE
from llm_validation.claims.decide.regime import MARGIN_RULE
from llm_validation.records.provenance import git_commit
from llm_validation.records.atomic_io import read_json, write_json
from llm_validation.validation.verdict import MIN_SEEDS

__all__ = ["FAMILY_ALPHA", "FDR_Q", "PROTOCOL_FILE", "ProtocolMismatch",
           "protocol", "digest", "code_digest", "decision_files", "write_protocol", "check_protocol",
           "protocol_markdown"]

#: The false-discovery rate of the Benjamini-Hochberg decisions shown beside them.
FDR_Q = 0.05
PROTOCOL_FILE = "protocol.json"
#: The files whose code decides a verdict (hashed into ``code_digest``, informational).
#: The family modules of the catalogue's claims (their statements and analyses) are added to
#: these (:func:`decision_files`).
_DECISION_CODE = ("claims/decide/checks.py", "claims/decide/decisions.py",
                  "claims/decide/pvalues.py", "claims/decide/familywise.py",
                  "claims/decide/gatekeeping.py",
                  "claims/decide/measure.py", "claims/decide/regime.py", "claims/decide/ladder.py",
                  "claims/catalogue/vocabulary.py", "validation/contrast.py",
                  "validation/inference.py", "validation/lag.py", "validation/graphical.py",
                  "validation/event_rate.py", "validation/permutation.py")
#: The package the paths of :data:`_DECISION_CODE` are relative to (``llm_validation/``).
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


class ProtocolMismatch(ValueError):
    """A ledger folder's recorded protocol differs from this checkout's rules."""


def _scale_doc(scale: Scale) -> dict[str, Any]:
    base = base_config(scale, "adamw")
    return {"name": scale.name, "model": scale.model, "steps": scale.steps,
            "tokens_per_param": scale.tokens_per_param,
            "batch_size": base.run.batch_size, "seq_len": base.data.seq_len,
            "warmup_steps": base.optim.warmup_steps, "schedule": base.optim.schedule,
            "lr_centres": dict(scale.lrs),
            "aux_lr": ("the swept AdamW lr (AdamW swept first)" if scale.aux_lr_from_adamw
                       else "Muon's own lr (optim.aux_lr unset)"),
            "eval_interval": base.run.eval_interval, "stats_interval": base.run.stats_interval}


def _claim_doc(c: Claim) -> dict[str, Any]:
    return {"id": c.id, "number": c.number, "figure": c.figure, "wording": c.wording,
            "grid": c.grid, "min_seeds": c.min_seeds,
            "arms": [{"key": a.key, "changes": a.describe() or "the base run"}
                     for a in c.arms],
            "statements": [{"id": s.id, "role": s.role, "quote": s.quote, "source": s.source,
                            "rule": s.decision} for s in c.statements]}


def protocol(claims: Sequence[Claim], scale: Scale, policy: SeedPolicy,
             seeds: Sequence[int], overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The rules of a ledger of ``claims`` at ``scale`` with the base-run ``overrides``
    (``--set``; see the module docstring)."""
    pol = {k: v for k, v in policy.to_dict().items() if k != "budget_min"}
    return {
        "version": 1,
        "scale": _scale_doc(scale), "overrides": list(overrides),
        "seeds": list(seeds), "min_seeds_for_a_verdict": MIN_SEEDS,
        "claim_rule": CLAIM_RULE,
        "family": {"method": "gatekeeping", "alpha": FAMILY_ALPHA,
                   "members": "the leaf checks of the paper's statements, by gatekeeping "
                              "(Bretz et al. 2009's graphical procedure): the central "
                              "statements' leaves are the primary family (Holm among them); "
                              "the leaves of a claim's side readings and the project's "
                              "readings are tested only once its central statement's first "
                              "leaf is decided, with the level it passes on (a central "
                              "verdict does not depend on how many side checks the ledger "
                              "carries); the divergence counts are outside it (an event rate "
                              "against a stated detection power); the theory's statements "
                              "form their own Holm family at the same alpha",
                   "decision_level": "a rejected leaf is read at 1 - (alpha p_raw / p_adj) / 2, "
                                     "within the level the procedure spent on it",
                   "sign_flip": "beside every t p-value, the exact sign-flip p-value of the "
                                "same routes (it decides nothing; it cannot fall below 2/2^n "
                                "with n seeds)",
                   "p_value": "the smallest alpha at which the check decides at level "
                              "1 - alpha/2 (the seeds policy's two looks, Bonferroni): "
                              "p_raw = 2 x the nominal p of its interval",
                   "beside": {"per_check": f"each check at level {policy.level1:.3f}",
                              "fdr": {"method": "benjamini-hochberg", "q": FDR_Q}}},
        "margins": {"unit": "compute-equivalent lag: the share of the synchronous run's "
                            "steps the delayed run is behind (validation/lag.py), read in "
                            "loss units off the synchronous partner's curve",
                    "paper_lag_fraction": PAPER_LAG_FRACTION, "rule": MARGIN_RULE,
                    "derivation": {"paper_nats": PAPER_NATS, "chinchilla_fit": CHINCHILLA_FIT,
                                   "lag_at": {k: compute_lag_fraction(PAPER_NATS, n)
                                              for k, n in PAPER_MODELS.items()}}},
        "constants": catalogue_thresholds(),
        "size_ladder": {"exponents": EXPONENT_NAME, "confound": CONFOUND,
                        "fit": "per seed least squares of log(value) on log(N) over the sizes, "
                               "t interval over seeds (claims.ladder.fit_slope); not "
                               "extrapolated, no agreement check decided"},
        "seeds_policy": pol,
        "lr_sweep": {"ratio": LR_RATIO, "first_grid": list(FIRST_GRID), "seeds": SWEEP_SEEDS,
                     "seed_numbers": list(sweep_seeds()),
                     "seed_rule": "the sweep's own seeds, none of which a claim uses",
                     "max_widen": MAX_WIDEN,
                     "rule": "lowest mean final validation loss over seeds; a diverged seed "
                             "disqualifies its lr; widened past an edge while the best sits "
                             "there"},
        "claims": [_claim_doc(c) for c in claims],
    }


def _canonical(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str).encode()


def digest(doc: Mapping[str, Any]) -> str:
    """SHA-256 of the protocol's canonical JSON (the recorded fields excluded)."""
    rules = {k: v for k, v in doc.items() if k not in ("digest", "commit", "code_digest")}
    return hashlib.sha256(_canonical(rules)).hexdigest()


def decision_files() -> tuple[str, ...]:
    """The files whose code decides a verdict, relative to ``llm_validation/``: the decision
    modules (:data:`_DECISION_CODE`) and every family module of the catalogue."""
    families = sorted({Path(inspect.getfile(c.analyse)).resolve().relative_to(_PACKAGE_ROOT)
                       .as_posix() for c in CLAIMS.values()})
    return _DECISION_CODE + tuple(families)


def code_digest() -> str:
    """SHA-256 over the decision code's files (:func:`decision_files`), informational;
    ``FileNotFoundError`` when one is missing (a relayout must say where the code went)."""
    h = hashlib.sha256()
    for rel in decision_files():
        p = _PACKAGE_ROOT / rel
        if not p.is_file():
            raise FileNotFoundError(f"code_digest: decision code {p} is missing "
                                    "(update report/protocol.py's _DECISION_CODE)")
        h.update(rel.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def protocol_markdown(doc: Mapping[str, Any]) -> str:
    """``protocol.md``: the same rules for a reader."""
    fam, mar, sc = doc["family"], doc["margins"], doc["scale"]
    lines = [f"# Protocol of the ledger at scale `{sc['name']}`", "",
             f"Digest `{doc.get('digest', digest(doc))}`, written at commit "
             f"`{doc.get('commit') or 'unknown'}`. Every verdict of a ledger that records this "
             "digest was decided by these rules; a ledger assembled under other rules says "
             "so (re-analysis).", "",
             "## Decisions", "",
             f"- **Claim status**: {doc['claim_rule']}.",
             f"- **Family-wise error**: {fam['method']} at {fam['alpha']:g} over "
             f"{fam['members']}. p-values: {fam['p_value']}.",
             f"- Beside it: {fam['beside']['per_check']}, and Benjamini-Hochberg at "
             f"{fam['beside']['fdr']['q']:g} FDR.",
             f"- **Margins and thresholds**: {mar['rule']}; unit: {mar['unit']}. The lag "
             f"{mar['paper_lag_fraction']:.4f} is 0.01 nats on Chinchilla's data term "
             f"({', '.join(f'{k}: {v:.2%}' for k, v in mar['derivation']['lag_at'].items())}"
             "; the smaller is used).",
             f"- **Seeds**: {doc['seeds']} (a verdict needs >= "
             f"{doc['min_seeds_for_a_verdict']}); policy: {doc['seeds_policy']['rule']}.",
             f"- **lr sweep**: factor {doc['lr_sweep']['ratio']:g} grid "
             f"{doc['lr_sweep']['first_grid']}, {doc['lr_sweep']['seeds']} seeds"
             + (f" ({doc['lr_sweep']['seed_numbers']}: {doc['lr_sweep']['seed_rule']})"
                if doc["lr_sweep"].get("seed_numbers") else "") + ", "
             f"{doc['lr_sweep']['rule']}.",
             f"- **Constants**: " + ", ".join(f"{k} = {v:g}"
                                              for k, v in doc["constants"].items()) + ".",
             f"- **Scale**: {sc['model']}, {sc['steps']} steps of {sc['batch_size']} x "
             f"{sc['seq_len']}, tokens per parameter {sc['tokens_per_param']}, warmup "
             f"{sc['warmup_steps']} steps, {sc['schedule']}, AdamW part of Muon/NorMuon at "
             f"{sc['aux_lr']}.", "", "## Claims", ""]
    for c in doc["claims"]:
        lines += [f"### {c['number']}. `{c['id']}` ({c['figure']})", "", f"> {c['wording']}", "",
                  f"- grid: {c['grid']}" + (f"; {c['min_seeds']} seeds at least"
                                            if c["min_seeds"] else "")]
        for st in c["statements"]:
            lines.append(f"- **{st['id']}** ({st['role']}; {st['source']}): {st['rule']}")
        lines.append("")
    return "\n".join(lines)


def write_protocol(out: str | Path, doc: Mapping[str, Any], name: str = PROTOCOL_FILE
                   ) -> dict[str, Any]:
    """Write ``doc`` with its digest, the commit and the code digest as ``out/name`` and its
    markdown beside it; returns the written document."""
    full = {**doc, "digest": digest(doc), "commit": git_commit(), "code_digest": code_digest()}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / name, full)
    (out / Path(name).with_suffix(".md").name).write_text(protocol_markdown(full) + "\n")
    return full


def check_protocol(out: str | Path, doc: Mapping[str, Any], reanalyse: bool = False
                   ) -> dict[str, Any]:
    """The protocol record of a ledger in ``out`` (written now when there is none):
    ``{"digest", "commit", "reanalysis": None | {"recorded": digest, "commit": ...}}``.
    :class:`ProtocolMismatch` when ``out`` holds a protocol with another digest and
    ``reanalyse`` is False."""
    path = Path(out) / PROTOCOL_FILE
    now = digest(doc)
    if not path.exists():
        runs = Path(out) / "runs"
        trained = runs.is_dir() and any(runs.glob("*/summary.json"))
        full = write_protocol(out, doc)
        # a folder whose runs trained before any protocol was recorded is re-analysed, not
        # pre-registered: its rules were written after (some of) its data existed
        return {"digest": now, "commit": full["commit"],
                "reanalysis": {"recorded": None, "recorded_commit": None,
                               "note": "no protocol was recorded before these runs trained"}
                if trained else None}
    recorded = read_json(path)
    if recorded.get("digest") == now:
        return {"digest": now, "commit": recorded.get("commit"), "reanalysis": None,
                "code_changed": recorded.get("code_digest") != code_digest()}
    if not reanalyse:
        raise ProtocolMismatch(
            f"{path} records protocol {str(recorded.get('digest'))[:12]} (commit "
            f"{str(recorded.get('commit'))[:12]}), but this checkout's rules are {now[:12]}: "
            "pass --reanalyse to assemble under the current rules as a labelled re-analysis")
    full = write_protocol(out, doc, name="protocol.reanalysis.json")
    return {"digest": now, "commit": full["commit"],
            "reanalysis": {"recorded": recorded.get("digest"),
                           "recorded_commit": recorded.get("commit")}}
