"""The delay-law ledger's front door: run the design's phases in order, write the held-out
predictions before the held-out cells train, and assemble the verdicts, laws and predictions.

Folder layout (``out``): ``protocol.json`` / ``protocol.md`` (committed before any run),
``runs/`` (one folder per run), ``lr_choice.json`` (after the ``lr`` phase),
``predictions.json`` (every candidate law's prediction for each held-out cell, written after
the ``train`` phase and committed before ``held-out`` starts), ``ledger.json`` / ``ledger.md``
and ``figures/`` (the assembly).

Algorithm
    :func:`run_phase` trains one phase with :func:`~llm_validation.sweep.runner.run_sweep`
    (resumable; ``jobs`` processes). ``lr``: afterwards each size's lr per optimizer is the
    profile point with the lowest mean closing loss (:func:`~llm_validation.delay_law.runs.
    choose_lr`). ``held-out`` is refused while ``predictions.json`` is missing.
    :func:`write_predictions` fits every law of :func:`~llm_validation.delay_law.laws.
    candidate_laws` on the finished training cells (per arm and quantity) and writes its
    prediction for every held-out cell. :func:`assemble` reads every cell
    (:func:`~llm_validation.delay_law.measure.cell_costs`), decides the statements
    (:mod:`~llm_validation.delay_law.verdicts`), scores the laws on the held-out cells, fits the
    chosen law on every cell and predicts the paper's settings
    (:mod:`~llm_validation.delay_law.paper`).

Assumptions
    One ledger per folder; the protocol in the folder is the checkout's (``ProtocolMismatch``
    otherwise: a rule changed after the runs makes the result exploratory, and says so).

Guarantee
    Nothing is lost on a crash: runs resume from their checkpoints, every JSON is written
    atomically, and a phase re-run trains only what is missing.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

from llm_validation.records.atomic_io import write_json
from llm_validation.claims.plan.plan import run_name
from llm_validation.delay_law import design
from llm_validation.delay_law.laws import (Law, Observed, candidate_laws, choose, fit_law,
                                           held_out_scores)
from llm_validation.delay_law.measure import CellCosts, cell_costs, observed, read_final
from llm_validation.delay_law.noise_scale import cell_snr, compare_regressors
from llm_validation.delay_law.paper import paper_predictions
from llm_validation.delay_law.paper_gap import gap_share_predictions
from llm_validation.delay_law.report import (exponent_at_fixed_steps, plot_lag_vs_lr,
                                             plot_lag_vs_size, plot_lag_vs_steps,
                                             plot_lr_profiles, render)
from llm_validation.delay_law.runs import LR_CENTRES, PHASES, choose_lr, lr_runs, phase_runs
from llm_validation.delay_law.verdicts import decide, statement_values, statements
from llm_validation.records.atomic_io import read_json
from llm_validation.rundir import process_seconds
from llm_validation.sweep.grid import SweepPoint
from llm_validation.sweep.runner import run_sweep
from llm_validation.validation.runs import is_complete

__all__ = ["TrainingIncomplete", "LR_FILE", "LR_FIGURE", "PREDICTIONS_FILE", "LEDGER_FILE",
           "QUANTITIES", "LAW_ARMS", "PREDICTION_RTOL", "run_phase", "status", "read_lrs",
           "write_predictions", "held_out_predictions", "check_predictions", "runs_started_before",
           "PACK_EXCLUDE", "pack_phase", "assemble"]

LR_FILE = "lr_choice.json"
#: The lr profiles' figure (under ``figures/``), drawn when the lr phase finishes.
LR_FIGURE = "lr_profiles.png"
PREDICTIONS_FILE = "predictions.json"
LEDGER_FILE = "ledger.json"
#: Relative difference within which a refitted law's estimate reproduces the committed one.
#: The same code on the same runs gives the same float (JSON keeps all 17 digits); the
#: tolerance only absorbs a linear-algebra library that orders its sums differently.
PREDICTION_RTOL = 1e-9
#: The costs a law is fitted to: the compute-equivalent lag and the gap share.
QUANTITIES = ("lag", "gap_share")
#: The arms whose cost the laws describe.
LAW_ARMS = ("adamw/2bw", "muon/2bw")


def read_lrs(out: str | Path) -> dict[str, dict[str, float]]:
    """The lrs the ``lr`` phase chose (size -> optimizer -> lr); ``FileNotFoundError`` naming
    the phase to run first."""
    path = Path(out) / LR_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run the 'lr' phase first")
    return {s: {o: float(v["lr"]) for o, v in opts.items()}
            for s, opts in read_json(path)["lrs"].items()}


def _choose_lrs(out: Path) -> dict[str, Any]:
    """Each size's lr per optimizer from its finished profile runs (written to LR_FILE)."""
    table: dict[tuple[str, str], dict[float, list[float]]] = {}
    for r in lr_runs():
        size = r.cell.split("/")[0]
        value, _, _ = read_final(out / "runs", r)
        table.setdefault((size, r.optimizer), {}).setdefault(r.lr_multiple, []).append(
            value if value is not None else math.nan)
    lrs: dict[str, dict[str, Any]] = {}
    for (size, opt), by in table.items():
        best, note = choose_lr(by)
        centre = LR_CENTRES[size][opt]
        lrs.setdefault(size, {})[opt] = {"lr": centre * best, "multiple": best, "note": note,
                                         "profile": {str(m): v for m, v in sorted(by.items())}}
    doc = {"rule": "lowest mean closing loss over the profile's seeds", "lrs": lrs}
    write_json(out / LR_FILE, doc)
    plot_lr_profiles(doc, out / "figures" / LR_FIGURE)
    return doc


def run_phase(phase: str, out: str | Path, *, jobs: int = 2, progress: bool = True) -> int:
    """Train ``phase``'s unfinished runs under ``out/runs``; returns how many runs it holds."""
    out = Path(out)
    if phase not in PHASES:
        raise ValueError(f"phase {phase!r} is not one of {list(PHASES)}")
    if phase == "held-out" and not (out / PREDICTIONS_FILE).exists():
        raise FileNotFoundError(f"{out / PREDICTIONS_FILE} is missing: the laws' predictions "
                                "for the held-out cells are written (and committed) before "
                                "they train")
    runs = phase_runs(phase, None if phase == "lr" else read_lrs(out))
    points = [SweepPoint(name=run_name(r.cfg), cfg=r.cfg) for r in runs]
    run_sweep(points, out / "runs", jobs=jobs, threads=1, progress=progress,
              grid={"delay_law_phase": phase})
    if phase == "lr":
        _choose_lrs(out)
    return len(points)


def _phase_runs_done(out: Path, phase: str, lrs: Mapping[str, Mapping[str, float]] | None
                     ) -> tuple[list[str], list[str]]:
    """The run folder names of ``phase`` and those finished
    (:func:`~llm_validation.validation.runs.is_complete`)."""
    names = [run_name(r.cfg) for r in phase_runs(phase, lrs)]
    return names, [n for n in names if is_complete(out / "runs" / n)]


def status(out: str | Path) -> dict[str, Any]:
    """Where the ledger stands, per phase: its runs, how many are finished
    (:func:`~llm_validation.validation.runs.is_complete`), started but not finished (a run
    folder without a finished summary), the process-minutes of the finished ones
    (:func:`~llm_validation.rundir.process_seconds`: measured over every invocation, or, for a
    run continued from a checkpoint that did not record it, its last invocation's rate over all
    its tokens, counted in ``estimated``), and the next step with what it waits on."""
    out = Path(out)
    have_lrs = (out / LR_FILE).exists()
    lrs = read_lrs(out) if have_lrs else None
    phases: dict[str, Any] = {}
    for phase in PHASES:
        if phase != "lr" and lrs is None:
            phases[phase] = {"runs": None, "waits_on": LR_FILE}
            continue
        names, done = _phase_runs_done(out, phase, lrs)
        started = [n for n in names if n not in set(done) and (out / "runs" / n).exists()]
        secs, estimated = 0.0, 0
        for n in done:
            try:
                s, measured = process_seconds(read_json(out / "runs" / n / "summary.json"))
            except (ValueError, OSError):
                continue
            secs += s
            estimated += not measured
        phases[phase] = {"runs": len(names), "finished": len(done), "started": len(started),
                         "process_minutes": secs / 60, "estimated": estimated}
    predictions = (out / PREDICTIONS_FILE).exists()
    stale = len(read_json(out / PREDICTIONS_FILE).get("train_missing", [])) if predictions else 0
    if not have_lrs:
        step = "run --phase lr"
    elif phases["train"]["finished"] < phases["train"]["runs"]:
        step = "run --phase train"
    elif not predictions:
        step = "predict, then commit predictions.json"
    elif stale:
        step = (f"predict again, then commit predictions.json (written while {stale} training "
                "runs were missing, which have finished since)")
    elif phases["held-out"]["finished"] < phases["held-out"]["runs"]:
        step = "run --phase held-out"
    else:
        step = "assemble"
    return {"phases": phases, "lr_choice": have_lrs, "predictions": predictions, "next": step}


#: Left out of a packed run: checkpoints (large, and a run without them is finished, never
#: trained again) and the folder lock.
PACK_EXCLUDE = ("checkpoints", ".lock")


def pack_phase(out: str | Path, phase: str) -> tuple[Path, int, int]:
    """The finished runs of ``phase`` packed without :data:`PACK_EXCLUDE` into
    ``out/runs-<phase>.tar.xz`` (written to a temporary name and renamed, so a crash leaves
    the previous pack), file times kept (``assemble`` reads them); unpacked into ``out`` it
    gives back ``runs/``. Returns (the file, runs packed, runs in the phase)."""
    import os
    import tarfile
    out = Path(out)
    if phase not in PHASES:
        raise ValueError(f"phase {phase!r} is not one of {list(PHASES)}")
    names, done = _phase_runs_done(out, phase, None if phase == "lr" else read_lrs(out))
    dest = out / f"runs-{phase}.tar.xz"
    tmp = dest.with_name(dest.name + ".tmp")

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = Path(info.name).parts
        return None if any(x in PACK_EXCLUDE for x in parts[2:]) else info
    with tarfile.open(tmp, "w:xz") as tar:
        for n in done:
            tar.add(out / "runs" / n, arcname=f"runs/{n}", filter=keep)
    os.replace(tmp, dest)
    return dest, len(done), len(names)


def _all_costs(out: Path, lrs: Mapping[str, Mapping[str, float]], held: bool | None
               ) -> dict[str, CellCosts]:
    return {c.name: cell_costs(c, out / "runs", lrs) for c in design.cells()
            if held is None or c.held_out == held}


def _law_doc(law: Law) -> dict[str, Any]:
    return {"features": list(law.features), "link": law.link}


class TrainingIncomplete(ValueError):
    """The training cells are not all finished: predictions would be fitted on part of them."""


def write_predictions(out: str | Path, *, allow_missing: bool = False) -> dict[str, Any]:
    """Every candidate law's prediction for every held-out cell, fitted on the training cells
    (per arm and quantity), written to ``predictions.json``.

    Refused (:class:`TrainingIncomplete`, naming the first runs) while a training run is
    missing, unfinished or damaged: predictions fitted on part of the training cells and then
    committed would be the protocol's predictions. ``allow_missing`` writes them anyway (a run
    that cannot be trained again) and records every missing run in the document."""
    out = Path(out)
    lrs = read_lrs(out)
    train = _all_costs(out, lrs, held=False)
    missing = [m for c in train.values() for m in c.missing]
    if missing and not allow_missing:
        raise TrainingIncomplete(
            f"{len(missing)} training run(s) not usable yet ({'; '.join(missing[:3])}"
            f"{'; ...' if len(missing) > 3 else ''}): finish the 'train' phase first, or pass "
            "--allow-missing to record them as missing")
    held = [c for c in design.cells() if c.held_out]
    doc: dict[str, Any] = {"held_out": [c.name for c in held], "train_missing": missing,
                           "written_at": datetime.now(timezone.utc).isoformat(
                               timespec="seconds"),
                           "laws": held_out_predictions(train, held)}
    write_json(out / PREDICTIONS_FILE, doc)
    return doc


def held_out_predictions(train: Mapping[str, CellCosts], held: Sequence[design.Cell]
                         ) -> dict[str, Any]:
    """Every candidate law fitted on the ``train`` cells (per arm and quantity) and its
    prediction (estimate and interval) for every ``held`` cell, keyed ``arm:quantity:law``;
    a law that cannot be fitted records the reason (``error``)."""
    laws: dict[str, Any] = {}
    for arm in LAW_ARMS:
        for q in QUANTITIES:
            cells = observed(train, arm, q)
            for law in candidate_laws():
                key = f"{arm}:{q}:{law.name}"
                try:
                    fit = fit_law(law, cells)
                except ValueError as e:
                    laws[key] = {"law": _law_doc(law), "error": str(e)}
                    continue
                preds = {}
                for c in held:
                    iv = fit.predict(Observed(name=c.name, n_params=c.n_params, steps=c.steps,
                                              lr_rel=c.lr_multiple, values={}))
                    preds[c.name] = {"estimate": iv.estimate, "lo": iv.lo, "hi": iv.hi}
                laws[key] = {"law": _law_doc(law), "predictions": preds}
    return laws


def runs_started_before(out: str | Path, when: str) -> list[str]:
    """The held-out runs whose folder was created before ``when`` (ISO time, the predictions'
    ``written_at``): their ``config.json`` is written when a run starts, and a resumed run only
    rewrites it later, so a run named here trained before the predictions existed. Read from
    file times, which a packed ledger keeps (``tar`` restores them)."""
    cutoff = datetime.fromisoformat(when).timestamp()
    early = []
    for r in phase_runs("held-out", read_lrs(out)):
        cfg = Path(out) / "runs" / run_name(r.cfg) / "config.json"
        if cfg.exists() and cfg.stat().st_mtime < cutoff:
            early.append(cfg.parent.name)
    return early


def check_predictions(committed: Mapping[str, Any] | None, refit: Mapping[str, Any]
                      ) -> dict[str, Any]:
    """Whether the laws refitted on the training runs at assembly reproduce the committed
    ``predictions.json`` (``committed``; None when the folder has none): every estimate within
    :data:`PREDICTION_RTOL`. A difference means the training runs changed after the
    predictions were committed, so the held-out scores are the refit's, not the protocol's."""
    if committed is None:
        return {"committed": False, "compared": 0, "differ": [], "max_rel_diff": math.nan,
                "train_missing": 0, "written_at": None}
    differ, worst, n = [], 0.0, 0
    for key, entry in refit.items():
        old = committed["laws"].get(key, {}).get("predictions")
        new = entry.get("predictions")
        if old is None or new is None:
            if (old is None) != (new is None):
                differ.append(key)
            continue
        for cell, p in new.items():
            n += 1
            q = old.get(cell, {}).get("estimate")
            rel = (math.inf if q is None else
                   abs(p["estimate"] - q) / max(abs(q), abs(p["estimate"]), 1e-300))
            worst = max(worst, rel)
            if rel > PREDICTION_RTOL and key not in differ:
                differ.append(key)
    return {"committed": True, "compared": n, "differ": differ, "max_rel_diff": worst,
            "train_missing": len(committed.get("train_missing", [])),
            "written_at": committed.get("written_at")}


def assemble(out: str | Path) -> dict[str, Any]:
    """Verdicts, held-out law scores, the chosen laws and N's exponent at fixed steps from
    the finished runs (written to ``ledger.json``; see the module docstring)."""
    out = Path(out)
    lrs = read_lrs(out)
    costs = _all_costs(out, lrs, held=None)
    cells = {c.name: c for c in design.cells()}
    shared = {cells[n].size: c for n, c in costs.items() if cells[n].role == "shared"}
    by_size: dict[str, list[CellCosts]] = {}
    for n, c in costs.items():
        if cells[n].lr_multiple == 1.0:
            by_size.setdefault(cells[n].size, []).append(c)
    ef_sizes = [s for s, c in shared.items() if "adamw/2bw+ef" in c.cell.arms]
    stmts = statements(list(shared), ef_sizes)
    values = statement_values(shared, by_size)
    verdicts = decide(stmts, values)
    laws: dict[str, Any] = {}
    for arm in LAW_ARMS:
        for q in QUANTITIES:
            train = observed({n: c for n, c in costs.items() if not cells[n].held_out}, arm, q)
            held = observed({n: c for n, c in costs.items() if cells[n].held_out}, arm, q)
            scores = held_out_scores(candidate_laws(), train, held)
            try:
                best = choose(scores)
            except ValueError:
                best = None
            laws[f"{arm}:{q}"] = {"scores": [s.__dict__ | {"errors": dict(s.errors)}
                                             for s in scores],
                                  "chosen": best.law if best else None}
    doc = {"statements": {s.id: {"text": s.text, "rule": s.rule, "parent": s.parent,
                                 "reading": s.reading, **verdicts[s.id].__dict__}
                          for s in stmts},
           "exponents": {o: exponent_at_fixed_steps(values[f"N-{o}"])
                         for o in ("adamw", "muon")},
           "laws": laws,
           "missing": {n: list(c.missing) for n, c in costs.items() if c.missing},
           "paper": paper_predictions(costs, laws),
           "paper_gap_share": gap_share_predictions(costs, laws, LAW_ARMS)}
    held_cells = [c for c in design.cells() if c.held_out]
    doc["predictions_check"] = check_predictions(
        read_json(out / PREDICTIONS_FILE) if (out / PREDICTIONS_FILE).exists() else None,
        held_out_predictions({n: c for n, c in costs.items() if not cells[n].held_out},
                             held_cells))
    written = doc["predictions_check"].get("written_at")
    doc["predictions_check"]["started_before"] = (runs_started_before(out, written)
                                                  if written else None)
    snr = {n: cell_snr(c.cell, out / "runs", lrs) for n, c in costs.items()}
    doc["noise_scale"] = {arm: compare_regressors(costs, snr, arm,
                                                  held=[c.name for c in held_cells])
                          for arm in LAW_ARMS}
    write_json(out / LEDGER_FILE, doc)
    figures = {"lag vs steps": plot_lag_vs_steps(costs, out / "figures" / "lag_vs_steps.png"),
               "lag vs N": plot_lag_vs_size(costs, out / "figures" / "lag_vs_size.png"),
               "lag vs lr": plot_lag_vs_lr(costs, out / "figures" / "lag_vs_lr.png")}
    figures = {k: v for k, v in figures.items() if v is not None}
    (out / "ledger.md").write_text(render(doc, {k: str(v.relative_to(out))
                                                for k, v in figures.items()}))
    return doc
