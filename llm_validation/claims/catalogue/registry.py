"""The ledger's 18 claims (the paper's 16 empirical claims, the project's synchronous-phases
claim 17, the horizon ladder 18), each with its grid, the reason for the grid and its rule.

Grids are the paper's settings scaled down to the tiny model and chosen once (never tuned until
a claim passes). Shared choices, each with its reason:

- **Optimizers.** The base block {sync, 2BW, 2BW+EF (lam = 1)} runs for AdamW, Muon, NorMuon and
  SOAP (the paper's main comparison); claims about "robust optimizers" use Muon alone where the
  budget allows one optimizer (said in the claim's reason).
- **Synchronous phases** (``sync_start``, ``sync_cooldown``): 5% of the run, "a few percent" as
  in the paper (the earlier 20% was far longer than the paper's phases; issue 16).
- **Learning rates**: each optimizer's peak lr is the ledger's lr-sweep stage's choice at the
  scale (:mod:`llm_validation.claims.plan.lr_sweep`); ``Times`` on ``optim.lr`` multiplies it.
- **Horizons**: the ladder claim (``horizon-ladder``) runs AdamW and Muon at :data:`LADDER`
  multiples of the base run, each with its own full lr schedule; the weight-decay and
  gradient-level-EF claims run at its long horizon :data:`LONG` (their effects need
  more than 200 steps: weights shrink < 1% at wd 0.1 in 200 steps).
- **Seeds**: 3 (``--seeds``), the fewest a verdict accepts (``validation.verdict.MIN_SEEDS``).

The gap of a delayed arm is its final validation loss minus its synchronous partner's, same
seed (``validation.runs.paired_gaps``). Run counts and costs: ``delaybound reproduce --list``.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from llm_validation.claims.record.arms import Times, delayed
from llm_validation.claims.record.claim import Claim, FigureSpec
from llm_validation.claims.catalogue.grids import (ALL4, DCASGD_COEFS, HALF, LADDER, LADDER_OPTIMIZERS,
                                         LONG, SYNC_PHASE, arm_at, ef_arm, ladder_key, rung,
                                         start_arm)
from llm_validation.claims.catalogue.statements import STATEMENTS
from llm_validation.config import optimizer_label, pipedream_taus

__all__ = ["CLAIMS", "claim_ids", "get_claims", "ON_REQUEST", "SIZE_LADDER_SEEDS",
           "ALL4", "SYNC_PHASE", "DCASGD_COEFS", "LADDER",
           "LONG", "LADDER_OPTIMIZERS", "ladder_key"]

_ef, _start, _at, _rung, _HALF = ef_arm, start_arm, arm_at, rung, HALF

_LONG = {"run.steps": LONG}
#: The divergence test's condition: the long horizon at a constant lr (a decaying lr hides a
#: slow divergence: the paper's runs diverge late, at full lr).
_LONG_CONST = {"run.steps": LONG, "optim.schedule": "constant"}

#: Muon's batch x lr cells beside the base one (claims 6 and 12 train them): claim 1b's grid.
_BATCH_LR_CELLS = (_at("muon", "optim.lr", Times(0.5), "lr=0.5x"),
                   _at("muon", "run.batch_size", Times(0.5), "bs=0.5x",
                       cond={"run.steps": Times(2.0)}),
                   _at("muon", "run.batch_size", Times(2.0), "bs=2x",
                       cond={"run.steps": Times(0.5)}))

_CLAIMS = (
    Claim(
        id="adamw-vs-muon", number=1, figure="Fig. 3",
        statements=STATEMENTS["adamw-vs-muon"],
        wording="AdamW degrades substantially under one-step delay, even with a synchronous "
                "start; Muon's final gap is much smaller. At the tuned lr, Muon's best async "
                "loss is within about 0.01 of its best sync loss.",
        arms=(delayed("adamw"), _start("adamw"), delayed("muon"), *_BATCH_LR_CELLS),
        grid="AdamW {sync, 2bw, 2bw+sync-start}, Muon {sync, 2bw} at their tuned lrs; for 1b "
             "Muon's batch x lr cells {(1x, 1x), (0.5x lr), (0.5x batch), (2x batch)}",
        reason="The paper's Fig. 3 setting at the tuned lr of each optimizer; the synchronous "
               "start is 5% of the run, a few percent as in the paper (the base block is shared "
               "with claims 2 and 15). Statement 1b's grid is the cells claims 6 and 12 train "
               "for Muon (no extra run; a full 3x3 batch x lr grid would cost 4x: the budget).",
        theory="LMO steps are bounded (<= 2 eta; docs/theory.md trend 7): Muon degrades less than "
               "AdamW under the same delay",
        plot=FigureSpec(kind="curves", title="Validation loss, sync vs one-step delay",
                        by_optimizer=True)),
    Claim(
        id="ef-halves-gap", number=2, figure="Fig. 2",
        statements=STATEMENTS["ef-halves-gap"],
        wording="Update-level EF (lam = 1) cuts the gap by more than half for most optimizers "
                "and beats the synchronous-start baseline.",
        arms=tuple(a for o in ALL4 for a in (delayed(o), _ef(o), _start(o))),
        grid="AdamW, Muon, NorMuon, SOAP x {sync, 2bw, 2bw+ef (lam=1), 2bw+sync-start}",
        reason="The paper's Fig. 2 optimizers at their tuned lrs; lam = 1 is the paper's "
               "default; the synchronous start is 5% of the run (a few percent, as in the paper).",
        theory="docs/theory.md result 5: EF (lam = 1) helps iff consecutive updates are aligned "
               "(l2: cosine > 1/2), so the predicted sign of the EF gain per optimizer is the "
               "sign of (mean cos of consecutive updates - 1/2)",
        plot=FigureSpec(kind="bars", title="Sync-async gap: plain, synchronous start, EF")),
    Claim(
        id="momentum-direction", number=3, figure="Fig. 4",
        statements=STATEMENTS["momentum-direction"],
        wording="The gap moves with the momentum decay in a consistent, optimizer-independent "
                "direction.",
        arms=(_at("adamw", "optim.beta1", 0.8, "beta1=0.8"), delayed("adamw", series="AdamW"),
              _at("muon", "optim.momentum", 0.85, "momentum=0.85"),
              delayed("muon", series="Muon")),
        grid="AdamW beta1 {0.8, 0.9}, Muon momentum {0.85, 0.95}; sync and 2bw",
        reason="The base momentum and one lower value per optimizer (alpha doubled or tripled, "
               "where the PL law predicts the gap to fall by 2-3x); two values rather than the "
               "paper's sweep: the budget.",
        theory="PL gap law (theory pl_delay_gap, gap_leading): d gap / d alpha < 0, so more "
               "momentum (smaller alpha = 1 - momentum) gives a larger gap",
        plot=FigureSpec(kind="lines", title="Gap vs momentum", x="momentum",
                        xlabel="momentum (AdamW beta1, Muon mu)")),
    Claim(
        id="horizon", number=4, figure="Fig. 5",
        statements=STATEMENTS["horizon"],
        wording="The gap does not grow with the training horizon; EF keeps reducing it.",
        arms=tuple(a for o in ("adamw", "muon") for a in (
            delayed(o), _ef(o), delayed(o, cond=_HALF, tag="steps=0.5x"),
            _ef(o, cond=_HALF, tag="steps=0.5x"))),
        grid="AdamW, Muon x {half, full run} x {sync, 2bw, 2bw+ef}",
        reason="Two horizons (the full run and its half, each with its own full lr schedule as "
               "in the paper); a longer horizon would cost 2x per run: the budget.",
        theory="PL floor (theory pl_delay_gap) is a limsup: the delay raises the floor and the "
               "gap tends to a constant, it does not grow with K",
        plot=FigureSpec(kind="lines", title="Gap vs training horizon", x="run.steps",
                        xlabel="training steps")),
    Claim(
        id="pipedream-depth", number=5, figure="Fig. 6",
        statements=STATEMENTS["pipedream-depth"],
        wording="Original PipeDream (stage s reads weights P-1-s steps old) degrades as P "
                "grows; 2BW's constant one-step delay does not.",
        arms=(delayed("muon"),) + tuple(
            delayed("muon", f"pipedream P={p}", tau=p - 1, stage_taus=pipedream_taus(p),
                    series="PipeDream") for p in (2, 3, 4)),
        grid="Muon, PipeDream stage delays (P-1-s) for P in {2, 3, 4}, and 2bw",
        reason="P up to 4, the tiny model's block count (a stage needs a block); Muon, the "
               "paper's main optimizer.",
        theory="PL gap law: d gap / d tau > 0 (theory pl_delay_gap), so larger stage delays "
               "give a larger gap; a constant tau = 1 gives a constant gap",
        plot=FigureSpec(kind="lines", title="Gap vs pipeline depth", x="stages",
                        xlabel="pipeline stages P", reference="muon/2bw")),
    Claim(
        id="learning-rate", number=6, figure="Fig. 7",
        statements=STATEMENTS["learning-rate"],
        wording="Lower peak lr mildly reduces the gap for robust optimizers; large lr badly "
                "hurts delayed AdamW.",
        arms=(_at("muon", "optim.lr", Times(0.5), "lr=0.5x"), delayed("muon", series="Muon"),
              delayed("adamw", series="AdamW"), _at("adamw", "optim.lr", Times(2.0), "lr=2x"),
              _at("adamw", "optim.lr", Times(4.0), "lr=4x"),
              _at("adamw", "optim.lr", Times(8.0), "lr=8x")),
        grid="Muon lr {0.5x, 1x}, AdamW lr {1x, 2x, 4x, 8x} of the swept lr; sync and 2bw",
        reason="One step down from the swept lr for Muon (the robust optimizers' half; Muon "
               "alone: the budget); AdamW up to 8x, the paper's 'large lr' (2x was too small "
               "to show it: issue 16), decided at 4x, chosen before the runs as the largest lr "
               "expected to keep the synchronous runs training at tiny (8x is shown beside it: "
               "the ledger's 8x synchronous runs did train).",
        theory="PL gap law: gap ~ eta^2 (d gap / d eta > 0): half the lr, a quarter of the gap; "
               "twice the lr, four times",
        plot=FigureSpec(kind="lines", title="Gap vs peak learning rate", x="optim.lr",
                        xlabel="peak learning rate", logx=True)),
    Claim(
        id="weight-decay", number=7, figure="Fig. 8",
        statements=STATEMENTS["weight-decay"],
        wording="Moderate weight decay has little effect; extreme values worsen delayed "
                "training; AdamW is sensitive to small weight decay.",
        arms=tuple(a for o in ("adamw", "muon") for a in (
            _at(o, "optim.weight_decay", 0.01, "wd=0.01", cond=_LONG, long=True),
            delayed(o, cond=_LONG, long=True, series=optimizer_label(o)),   # = the 4H rung
            _at(o, "optim.weight_decay", 1.0, "wd=1", cond=_LONG, long=True))),
        grid="AdamW, Muon x weight decay {0.01, 0.1, 1.0} at the ladder's long horizon (4x the "
             "base run: 800 steps at tiny, own full lr schedule); sync and 2bw",
        reason="0.1 is the base (moderate), 0.01 small, 1.0 extreme (lr x wd = 1e-2 per step "
               "for Muon: the weights shrink ~2x in 70 steps). At the long horizon because at "
               "200 steps weight decay is inert (weights shrink < 1% at wd 0.1); the wd 0.1 "
               "runs are the ladder's 4H rung (shared). 4H, not the top rung 8H: 8H would "
               "push the tiny ledger past its 4-hour budget.",
        theory=None,
        plot=FigureSpec(kind="lines", title="Gap vs weight decay", x="optim.weight_decay",
                        xlabel="weight decay (decoupled, per unit lr)", logx=True)),
    Claim(
        id="warmup", number=8, figure="Fig. 9",
        statements=STATEMENTS["warmup"],
        wording="Longer lr warmup mildly reduces the gap, most for AdamW.",
        arms=tuple(a for o in ("adamw", "muon") for a in (
            delayed(o), delayed(o, cond={"optim.warmup_steps": SYNC_PHASE},
                                tag="warmup=5%"))),
        grid="AdamW, Muon x warmup {0, 5% of the run}; sync and 2bw",
        reason="No warmup is the base; 5% is a warmup of a few percent as in the paper (the "
               "earlier 20% was far longer than the paper's; one extra value: "
               "the budget).",
        theory="docs/theory.md trend 2: delay leaves early training alone and raises the floor, so "
               "changing only early lrs should leave the final gap unchanged",
        plot=FigureSpec(kind="bars", title="Gap with and without lr warmup")),
    Claim(
        id="grad-clip", number=9, figure="Fig. 10",
        statements=STATEMENTS["grad-clip"],
        wording="The gap is insensitive to the gradient-clipping threshold for robust "
                "optimizers.",
        arms=(delayed("muon"), delayed("muon", cond={"optim.grad_clip": 1.0}, tag="clip=1"),
              delayed("muon", cond={"optim.grad_clip": 0.25}, tag="clip=0.25")),
        grid="Muon x clip {off, 1.0, 0.25}; sync and 2bw",
        reason="1.0 is the common default (clips the initial transient, grad norm ~10); 0.25 "
               "binds on most steps (grad norm ~0.5-1 after the transient); Muon alone: the "
               "budget.",
        theory=None,
        plot=FigureSpec(kind="bars", title="Gap vs gradient-clipping threshold")),
    Claim(
        id="lr-schedule", number=10, figure="Fig. 11",
        statements=STATEMENTS["lr-schedule"],
        wording="The gap is similar across lr schedules (cosine, linear, WSD, constant) for "
                "Muon, NorMuon, SOAP.",
        arms=tuple(delayed("muon", cond={"optim.schedule": s} if s != "cosine" else None,
                           tag=f"{s}" if s != "cosine" else "") for s in
                   ("cosine", "linear", "wsd", "constant")),
        grid="Muon x schedule {cosine (base), linear, wsd, constant}; sync and 2bw",
        reason="All four schedules of the paper; Muon only (NorMuon and SOAP would triple the "
               "cost: the budget).",
        theory="PL gap law: the floor scales with eta^2 at the end of training, so a constant "
               "schedule (ending at the peak lr) should show a larger gap than decaying ones",
        plot=FigureSpec(kind="bars", title="Gap per learning-rate schedule")),
    Claim(
        id="beta2", number=11, figure="Fig. 12",
        statements=STATEMENTS["beta2"],
        wording="beta2 has no consistent optimizer-independent effect on the gap.",
        arms=tuple(a for o in ("adamw", "soap") for a in (
            delayed(o), delayed(o, cond={"optim.beta2": 0.99}, tag="beta2=0.99"))),
        grid="AdamW, SOAP x beta2 {0.95, 0.99}; sync and 2bw",
        reason="The two beta2 values LLM recipes use; AdamW and SOAP, the Adam-family "
               "optimizers whose update beta2 shapes most.",
        theory=None,
        plot=FigureSpec(kind="bars", title="Gap vs beta2")),
    Claim(
        id="batch-size", number=12, figure="Fig. 13",
        statements=STATEMENTS["batch-size"],
        wording="Smaller batches shrink the gap, larger ones grow it (batch x lr grid).",
        arms=(_at("muon", "run.batch_size", Times(0.5), "bs=0.5x",
                  cond={"run.steps": Times(2.0)}),
              delayed("muon", series="Muon"),
              _at("muon", "run.batch_size", Times(2.0), "bs=2x",
                  cond={"run.steps": Times(0.5)})),
        grid="Muon x batch {0.5x, 1x, 2x} of the base (8, 16, 32 sequences at tiny) at a fixed "
             "token budget (400, 200, 100 steps) and the swept lr; sync and 2bw",
        reason="Half and twice the base batch at a fixed lr and a fixed token budget, as the "
               "paper's runs hold the tokens fixed (the earlier arms held the steps fixed); the "
               "lr axis of the paper's grid is claim 6's (Muon, 0.5x lr): a full 3x3 grid "
               "would cost 4x: the budget.",
        theory="docs/theory.md trend 4: gradient noise (small batches) hides the delay term, larger "
               "batches expose it",
        plot=FigureSpec(kind="lines", title="Gap vs batch size", x="run.batch_size",
                        xlabel="batch size (sequences per step)", logx=True)),
    Claim(
        id="dcasgd", number=13, figure="Fig. 14",
        statements=STATEMENTS["dcasgd"],
        wording="DC-ASGD-style Taylor compensation does not beat plain delayed Muon for any "
                "coefficient.",
        arms=(delayed("muon"),) + tuple(
            delayed("muon", f"2bw+dcasgd(c={c:g})", correction="dcasgd", correction_coef=c)
            for c in DCASGD_COEFS),
        grid="Muon 2bw with DC-ASGD c in {1e3, 1e5}, and plain 2bw",
        reason="DC-ASGD's own lambda (Zheng et al.: up to 2) makes c g*g*(W - y) ~1e-6 of the "
               "gradient here (entries ~1e-3, steps ~1e-3): no change at all, so it is not "
               "run (its pass said nothing); c = 1e3 and 1e5 bring the compensation to ~0.1% "
               "and ~10% of the gradient, where it acts.",
        theory=None,
        plot=FigureSpec(kind="bars", title="DC-ASGD compensation vs plain delayed Muon")),
    Claim(
        id="ef-coefficient", number=14, figure="Fig. 15",
        statements=STATEMENTS["ef-coefficient"],
        wording="The best EF coefficient is optimizer-specific: NorMuon U-shaped with its "
                "optimum below 1; AdamW, Muon, SOAP best at larger values.",
        arms=tuple(a for o in ALL4 for a in (
            delayed(o, series=optimizer_label(o)), _ef(o, 0.5, series=optimizer_label(o)),
            _ef(o, 1.0, series=optimizer_label(o)))),
        grid="AdamW, Muon, NorMuon, SOAP x lam {0 (plain 2bw), 0.5, 1}",
        reason="lam = 0.5 and 1 bracket the paper's optima; three points are the fewest that "
               "show a U (a fourth value per optimizer: the budget).",
        theory="docs/theory.md result 5: the best lam is about the mean cosine of consecutive "
               "updates (l2)",
        plot=FigureSpec(kind="lines", title="Gap vs EF coefficient", x="delay.ef_lambda",
                        xlabel="EF coefficient lam")),
    Claim(
        id="alignment", number=15, figure="Figs. 17-18",
        statements=STATEMENTS["alignment"],
        wording="Delayed and fresh updates stay aligned (cosine) and their relative error is "
                "small for the robust optimizers, with a transient when the delay switches on.",
        arms=tuple(delayed(o) for o in ALL4) + tuple(_start(o) for o in ALL4[1:]),
        grid="AdamW, Muon, NorMuon, SOAP 2bw; Muon, NorMuon, SOAP 2bw+sync-start (statistics "
             "every 15 steps)",
        reason="The runs of claim 2 (no extra cost); AdamW, the optimizer the paper calls "
               "non-robust, is the reference the robust optimizers are compared with.",
        theory=None,
        plot=FigureSpec(kind="curves", title="Delayed vs fresh update",
                        metrics=("cos_delayed_fresh", "rel_err_delayed_fresh"),
                        ylabels=("cos(delayed, fresh update)", "relative error"))),
    Claim(
        id="grad-level-ef", number=16, figure="Fig. 19",
        statements=STATEMENTS["grad-level-ef"],
        wording="Gradient-level EF diverges where update-level EF works.",
        arms=tuple(a for o in ("adamw", "muon") for a in (
            _ef(o, cond=_LONG_CONST, long=True),
            delayed(o, "2bw+grad-ef", cond=_LONG_CONST, long=True, ef_lambda=1.0,
                    ef_level="grad"))),
        grid="AdamW, Muon x {update-level, gradient-level} EF, lam = 1, at the ladder's long "
             "horizon (4x the base run: 800 steps at tiny) with a constant lr",
        reason="lam = 1, the paper's setting, for the two optimizers of the headline; the "
               "paper's gradient-level EF diverges over long runs, which 200 steps with an lr "
               "decaying to 0.1x cannot show: hence the long horizon at a constant lr. Next to "
               "diverged / not diverged the graded outcome is the paired difference of final "
               "validation losses, gradient-level minus update-level. 4H, not 8H: the budget.",
        theory=None,
        plot=FigureSpec(kind="curves", title="Update-level vs gradient-level EF",
                        metrics=("loss",), ylabels=("training loss (nats/byte)",),
                        by_optimizer=True)),
    Claim(
        id="sync-phases", number=17, figure="appendix",
        statements=STATEMENTS["sync-phases"],
        wording="A synchronous cooldown (last part of training without delay) and a "
                "synchronous start (first steps without delay): their effect on the final gap.",
        arms=tuple(a for o in ("adamw", "muon") for a in (
            delayed(o), _start(o), delayed(o, "2bw+sync-cooldown", sync_cooldown=SYNC_PHASE))),
        grid="AdamW, Muon x {2bw, 2bw+sync-start, 2bw+sync-cooldown} (5% phases)",
        reason="The paper reports both ablations without a direction in the brief; the "
               "directions decided are docs/theory.md trend 2's.",
        theory="docs/theory.md trend 2: delay leaves early training alone and raises the loss "
               "floor, so a synchronous cooldown removes most of the gap and a synchronous "
               "start little",
        plot=FigureSpec(kind="bars", title="Synchronous start vs synchronous cooldown")),
)

_LADDER_CLAIM = Claim(
    id="horizon-ladder", number=18, figure="Fig. 5, four horizons",
    statements=STATEMENTS["horizon-ladder"],
    wording="The gap does not grow with the training horizon, measured over four doublings; "
            "and is the gap here lost early progress (lag-like: it shrinks as the horizon "
            "grows) or a floor (it stays)?",
    arms=tuple(_rung(o, m, f) for o in LADDER_OPTIMIZERS for m in ("2bw", "2bw+ef")
               for f in LADDER),
    grid="AdamW, Muon x {sync, 2bw, 2bw+ef} x horizon {1, 2, 4, 8} x the base run (200, 400, "
         "800, 1600 steps at tiny), each with its own full lr schedule",
    reason="Four doublings reach 1600 steps (1.6 tokens per parameter at tiny, still far from "
           "the paper's 20+); AdamW and Muon only (NorMuon and SOAP would add ~80 "
           "process-minutes each: the budget). The base rung is the base block of claims 1-2 "
           "(shared); --quick runs the first two rungs.",
    theory="PL floor (theory pl_delay_gap) is a limsup: once the loss is near its floor the "
           "gap tends to a constant (floor-like); far from it the delay costs steps (lag-like)",
    plot=FigureSpec(kind="ladder", title="Gap and lag vs training horizon"))

#: The size ladder (issue 27): the headline contrasts at every model size of the 20:1 scales,
#: five seeds; the size trend and its extrapolation are fitted across the sizes' ledgers
#: (``reproduce --size-ladder``, :mod:`llm_validation.claims.sizes.fit`).
SIZE_LADDER_SEEDS = 5
_SIZE_CLAIM = Claim(
    id="size-ladder", number=19, figure="Figs. 2-3 at three model sizes",
    statements=STATEMENTS["size-ladder"],
    wording="AdamW degrades under one-step delay far more than Muon, and update-level EF cuts "
            "the gap by more than half, at every model size at 20 tokens per parameter; how "
            "does the delay's cost scale with the model size?",
    arms=tuple(a for o in LADDER_OPTIMIZERS for a in (delayed(o, series=optimizer_label(o)),
                                                      _ef(o, series=optimizer_label(o)))),
    grid="AdamW, Muon x {sync, 2bw, 2bw+ef} at the scale's base run (20 tokens per "
         "parameter), 5 seeds, at each size of the ladder (46k, 113k, 267k parameters)",
    reason="The paper's headline contrasts (Figs. 2-3) at the paper's 20:1 ratio on models "
           "small enough for 2 CPU cores; five seeds for per-seed fits across sizes; AdamW and "
           "Muon only (the budget: NorMuon and SOAP would double it).",
    theory=None, min_seeds=SIZE_LADDER_SEEDS,
    plot=FigureSpec(kind="bars", title="Gap at this model size, 20 tokens per parameter"))
#: Claims run only where asked for (``--claims``) or by a scale that lists them (the size
#: ladder's scales): the default selection of the other scales leaves them out.
ON_REQUEST = frozenset({"size-ladder"})

#: The claims by id, in the paper's order.
_CLAIMS = _CLAIMS + (_LADDER_CLAIM, _SIZE_CLAIM)
CLAIMS = {c.id: c for c in _CLAIMS}


def claim_ids() -> tuple[str, ...]:
    return tuple(CLAIMS)


def get_claims(ids: Iterable[str] | None = None) -> list[Claim]:
    """The claims named (when None: all but :data:`ON_REQUEST`), in registry order;
    ``ValueError`` for unknown ids."""
    if ids is None:
        return [c for c in _CLAIMS if c.id not in ON_REQUEST]
    wanted: Sequence[str] = [i.strip() for i in ids if i.strip()]
    if list(wanted) == ["all"]:
        return list(_CLAIMS)
    if not wanted:
        raise ValueError("--claims: give at least one claim id")
    unknown = [i for i in wanted if i not in CLAIMS]
    if unknown:
        raise ValueError(f"unknown claim id(s) {unknown}; known: {', '.join(CLAIMS)}")
    return [c for c in _CLAIMS if c.id in set(wanted)]
