"""``repeat: adaptive``: which cases to re-try, when to stop, and what the trials say (pure; the runner
and ``bench.stats`` both drive it).

Rounds. Round 1 runs every case once. After it:

* the **pass-rate comparison** (``verdict.sequential``) looks at the first trials: McNemar of base run 0
  against head trial 0. Regression or futility ends it; in between, round 2 re-tries on the head side the
  cases that flipped against the base (either way), are flaky in the base's history (``flaky_history``) or
  scored a gated metric near its threshold (``near_threshold``), and
  compares each re-trial with the base runs 1, 2, … of the baseline (never with run 0, which chose the
  case): look 2. A case without a base run beyond run 0 cannot join look 2 (the base's evidence is thin):
  when no case can, the comparison ends **inconclusive** and says that a base run with ``repeat: 5``
  resolves it;
* every **critical case** runs its SPRT (``sequential.critical_sprt``) round after round until it is
  blocked, cleared or reaches ``CRITICAL_MAX_TRIALS``.

The rounds stop when nothing is left to re-try or the budget (``parse_budget``) is spent; a comparison or
a critical case still open then is inconclusive.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalgate.verdict import sequential, stats


@dataclass
class CaseTrials:
    """One case's outcomes so far: head trials in order, the base's runs in order (may be empty)."""

    id: str
    critical: bool
    head: list[bool] = field(default_factory=list)
    base: list[bool] = field(default_factory=list)

    @property
    def flipped(self) -> bool:
        return bool(self.base) and bool(self.head) and self.base[0] != self.head[0]

    @property
    def flaky_on_base(self) -> bool:
        return len(set(self.base)) > 1


@dataclass
class Plan:
    """The adaptive state of a run: per case trials, the comparison's looks and the critical decisions."""

    alpha: float
    level: float
    """The pass rate's first-step level in the family (weight × α): the looks stop for it."""
    requirement: float = 0.9
    design: sequential.Design = sequential.DESIGN
    cases: dict[str, CaseTrials] = field(default_factory=dict)
    stage_p: list[float] = field(default_factory=list)
    decision: str = "continue"
    stage2: list[str] = field(default_factory=list)
    rounds: int = 1
    retrials: int = 0
    budget_spent: bool = False
    thin_base: bool = False
    flaky_history: frozenset[str] = frozenset()
    """Cases flaky in the base's recorded history (runs other than the baseline's): re-tried at look 2."""
    near: set[str] = field(default_factory=set)
    """Cases whose first trial scored a gated metric within its tolerance of the threshold (``near_threshold``)."""

    def add(self, case_id: str, critical: bool, passed: bool, base: Sequence[bool] = ()) -> None:
        """A head trial of ``case_id`` (``base``: the base's run outcomes, read on its first trial)."""
        entry = self.cases.get(case_id)
        if entry is None:
            entry = self.cases[case_id] = CaseTrials(case_id, critical, base=list(base))
        entry.head.append(bool(passed))

    # ── deciding ──

    def first_look(self) -> None:
        """Look 1 of the pass-rate comparison over the cases with a base run."""
        paired = [c for c in self.cases.values() if c.base and c.head]
        if not paired:
            self.decision = "no baseline"
            return
        worse = sum(1 for c in paired if c.base[0] and not c.head[0])
        better = sum(1 for c in paired if not c.base[0] and c.head[0])
        self.stage_p = [stats.mcnemar_one_sided(worse, better)]
        self.decision = sequential.look(self.stage_p, self.level, self.design)
        if self.decision == "continue":
            # chosen from look-1 data and history only: the base runs 1, 2, … that look 2 compares with
            # must not choose the cases (selecting on them would bias the comparison)
            self.stage2 = [c.id for c in paired if c.flipped or c.id in self.flaky_history or c.id in self.near]
            if not any(len(self.cases[i].base) > 1 for i in self.stage2):
                self.thin_base = True

    def second_look(self) -> None:
        """Look 2 over every case re-tried once look 1 continued (chosen by look-1 data, history and criticality
        only) that has a fresh base run: the exact stratified exchange test of base runs 1… against head trial 1.
        A replay from the records (``compare.adaptive_plan``) sees the same cases."""
        strata = [(sum(c.base[1:]), len(c.base) - 1, int(c.head[1]), 1)
                  for c in self.cases.values() if len(c.base) > 1 and len(c.head) > 1]
        if not strata:
            return
        self.stage_p.append(stats.stratified_exchange_p(strata))
        self.decision = sequential.look(self.stage_p, self.level, self.design)

    def alpha_case(self) -> float:
        """Each critical case's level: α / (critical cases) (Bonferroni)."""
        critical = sum(1 for c in self.cases.values() if c.critical)
        return self.alpha / max(1, critical)

    def critical_evidence(self, case: CaseTrials) -> sequential.CriticalEvidence:
        return sequential.critical_sprt(case.head, self.requirement, self.alpha_case())

    def wanted(self) -> list[str]:
        """The cases to re-try in the next round (ids): the undecided critical cases first (their SPRT gates the
        run), then look 2's cases in first-seen order."""
        critical = [c.id for c in self.cases.values() if c.critical
                    and self.critical_evidence(c).decision == "undecided"
                    and len(c.head) < sequential.CRITICAL_MAX_TRIALS]
        chosen = set(critical)
        if self.rounds == 1 and self.decision == "continue" and not self.thin_base:
            critical += [i for i in self.stage2 if i not in chosen and len(self.cases[i].base) > 1]
        return critical

    def next_round(self, room: int | None) -> list[str]:
        """The cases of the next round, at most ``room`` of them (None: no cap): ``budget_spent`` is set when
        the cap cut the round; the round and its trials are counted."""
        wanted = self.wanted()
        if room is not None and room < len(wanted):
            self.budget_spent = True
            wanted = wanted[:max(0, room)]
        if wanted:
            self.retrials += len(wanted)
            self.rounds += 1
        return wanted

    def after_round(self) -> None:
        """Update the looks once a round's trials are in."""
        if self.rounds == 1:
            self.first_look()
        elif self.rounds == 2 and self.decision == "continue" and len(self.stage_p) == 1:
            self.second_look()

    # ── outcome ──

    def comparison_verdict(self) -> str:
        """regression · no regression · inconclusive (the pass-rate design's decision) · no baseline."""
        if self.decision == "continue":
            return "inconclusive"
        return self.decision

    def case_status(self, case_id: str, base_failures: int = 0) -> tuple[str, str]:
        """A critical case's status from its SPRT and a one-line reason: ``failed`` when blocked (or
        undecided with a failure: missing evidence never passes), ``known flaky`` when blocked but the base
        fails it too and the head is not significantly worse, else ``passed``."""
        case = self.cases[case_id]
        evidence = self.critical_evidence(case)
        passes, trials = evidence.passes, evidence.trials
        said = f"passed {passes} of {trials} trial(s)"
        if evidence.decision == "blocked":
            if case.base and not all(case.base):
                p = stats.stratified_exchange_p([(sum(case.base), len(case.base), passes, trials)])
                if p > self.alpha_case():
                    return "known flaky", (f"{said}: below the required pass probability {self.requirement:g}, "
                                           f"but the base fails it too ({sum(case.base)} of {len(case.base)} "
                                           f"base runs passed; not significantly worse, p={p:.2g})")
            return "failed", (f"{said}: its pass probability is below the required {self.requirement:g} "
                              f"(SPRT, error ≤ {self.alpha_case():.2g} per case)")
        if evidence.decision == "undecided" and evidence.log_ratio > 0:
            return "failed", (f"{said}: re-trials ended before the SPRT decided and the evidence leans below "
                              f"the required {self.requirement:g} (likelihood ratio > 1; missing evidence does not "
                              "pass)")
        if evidence.decision == "cleared":
            return "passed", f"{said}: meets the required pass probability {self.requirement:g} (SPRT)"
        return "passed", (f"{said}: re-trials ended before the SPRT decided; the evidence leans towards the "
                          f"required {self.requirement:g} (likelihood ratio ≤ 1)")

    def report(self) -> dict[str, Any]:
        """The ``adaptive`` block of results.json."""
        bounds = sequential.boundaries(self.level, self.design.fractions, self.design.spending)
        zs = sequential.combined(self.stage_p, self.design.fractions)
        critical = {c.id: self.critical_evidence(c).to_dict() | {"status": self.case_status(c.id)[0]}
                    for c in self.cases.values() if c.critical}
        resolve = []
        if self.comparison_verdict() == "inconclusive":
            if self.thin_base:
                resolve.append("base runs with repeat: 5 (the baseline has one run per case: re-trials have no "
                               "fresh base run to be compared with)")
            if self.budget_spent:
                resolve.append("a larger adaptive_budget (it was spent before the second look)")
        return {
            "design": self.design.to_dict() | {"level": self.level, "bounds": list(bounds)},
            "looks": [{"look": k + 1, "p_value": p, "z": z, "bound": bounds[k]}
                      for k, (p, z) in enumerate(zip(self.stage_p, zs, strict=True))],
            "decision": self.comparison_verdict(),
            "resolve": resolve,
            "look2_cases": len(self.stage2),
            "rounds": self.rounds,
            "retrials": self.retrials,
            "budget_spent": self.budget_spent,
            "trials": {c.id: len(c.head) for c in self.cases.values() if len(c.head) > 1},
            "critical": critical,
            "critical_requirement": self.requirement,
            "critical_alpha_per_case": self.alpha_case(),
        }


NEAR_THRESHOLD = 0.05
"""A score this close to its threshold (× max(1, |threshold|)), or within the metric's tolerance, is uncertain."""


def near_threshold(metrics: Mapping[str, Any], tolerances: Mapping[str, Any]) -> bool:
    """True when some metric with a threshold scored within max(its tolerance amount, ``NEAR_THRESHOLD`` ×
    max(1, |threshold|)) of the threshold: one more trial may land on the other side. ``metrics``: name →
    an object with ``value`` and ``threshold`` (``op``, ``value``); ``tolerances``: name → ``Tolerance``."""
    for name, result in metrics.items():
        value, threshold = getattr(result, "value", None), getattr(result, "threshold", None)
        if value is None or threshold is None:
            continue
        bound = float(threshold.value)
        tolerance = tolerances.get(name)
        allowed = max(tolerance.amount(bound) if tolerance else 0.0, NEAR_THRESHOLD * max(1.0, abs(bound)))
        if abs(float(value) - bound) <= allowed:
            return True
    return False


def base_outcomes(records: Iterable[Mapping[str, Any]]) -> dict[str, list[bool]]:
    """case id → the base's run outcomes in repeat order (skipped runs left out)."""
    runs: dict[str, list[tuple[int, bool]]] = {}
    for record in records:
        status = record.get("status")
        if status == "skipped":
            continue
        passed = status == "passed" if isinstance(status, str) else bool(record.get("passed"))
        runs.setdefault(str(record.get("id")), []).append((int(record.get("repeat") or 0), passed))
    return {case_id: [p for _, p in sorted(values)] for case_id, values in runs.items()}
