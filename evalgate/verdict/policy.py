"""The gate's policy: what decided pass or fail in one run (``gate_policy`` in results.json), and what a pull
request loosened against its base run (``gate.loosened``). Pure.

A pull request's author writes its ``evalgate.yaml`` and datasets, so a PR can weaken its own gate: lower
a threshold, drop a metric, widen ``regression_tolerance``, raise ``significance_level``, add
``optional_metrics``, relax ``calibration``, demote critical cases or delete failing ones. Each run
records its policy (``snapshot``); with a baseline, ``loosenings(base, head)`` lists every change that
makes the head's gate easier to pass than the base's (tightenings are not listed). docs/security.md,
"Gate changes".

Beyond the thresholds and gate settings a snapshot records everything else that can change a verdict
(``RUN_SETTINGS``): ``repeat``, the answer source (target kind and a digest of its identity), the judge
(provider, model, base URL's host, temperatures, samples, seed, output mode), the simulated user's model, a
digest of every user metric's definition (its declaration and, for code, the defining file's content or the
installed distribution and version), a digest of each suite's settings, ``max_answer_chars``, ``traces`` and
``pairwise``, ``repeat: adaptive`` with its budget and ``critical_pass_probability``, and each metric's better
direction (``higher``/``lower``). A change whose direction cannot be judged (another judge model, another target,
a metric's code or direction) is listed: it is the base's evidence no more.

With the base run's case records (the comparison, exact at any number of cases) a loosening also lists the
cases whose expectations were edited (``expectation`` digests, ``runner.expectations``) and the critical cases
demoted; without them, the snapshots' case facts are compared.

Case facts stay bounded whatever the run's size (``CaseSet``): the number of cases (repeat 0), an
order-independent digest of their ids — Σ BLAKE2b-128(id) mod 2¹²⁸, so the set, not the
order the cases finished in, decides it — and the ids themselves only while there are at most
``ID_LIST_LIMIT``; the same for the critical cases.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from evalgate.verdict.calibration import calibration_loosenings

POLICY_VERSION = 2
ID_LIST_LIMIT = 1000
"""Most case ids a snapshot lists (beyond: count and digest only)."""
EXAMPLES = 5
"""Case ids named in one loosening (the rest counted)."""
GATE_CHANGES = ("report", "fail")
REPEAT_STRICTNESS = {"any": 0, "majority": 1, "all": 2}
LOWER_OPS = ("min", "gt")
"""Threshold operators bounding a metric from below (the others, ``max``/``lt``, from above)."""


class CaseSet:
    """Sink: the run's case ids (repeat 0) and its critical ones, in bounded memory (module docstring)."""

    def __init__(self, limit: int = ID_LIST_LIMIT) -> None:
        self.limit = limit
        self.all = _IdSet(limit)
        self.critical = _IdSet(limit)

    def add(self, result: Any) -> None:
        if result.repeat:
            return
        self.add_id(str(result.id), str(result.risk_level) == "critical")

    def add_id(self, case_id: str, critical: bool) -> None:
        self.all.add(case_id)
        if critical:
            self.critical.add(case_id)

    def as_dict(self) -> dict[str, Any]:
        return {**self.all.as_dict(), "critical": self.critical.as_dict()}


class _IdSet:
    __slots__ = ("count", "ids", "limit", "sum")

    def __init__(self, limit: int) -> None:
        self.count = 0
        self.sum = 0
        self.ids: list[str] | None = []
        self.limit = limit

    def add(self, case_id: str) -> None:
        self.count += 1
        self.sum += int.from_bytes(hashlib.blake2b(case_id.encode(), digest_size=16).digest(), "big")
        if self.ids is not None:
            if len(self.ids) < self.limit:
                self.ids.append(case_id)
            else:
                self.ids = None

    def as_dict(self) -> dict[str, Any]:
        return {"count": self.count, "digest": f"{self.sum % (1 << 128):032x}",
                "ids": sorted(self.ids) if self.ids is not None else None}


def snapshot(
    *,
    thresholds: Mapping[str, Mapping[str, float]],
    threshold_origins: Mapping[str, str],
    computed: Iterable[str],
    settings: Mapping[str, Any],
    origins: Mapping[str, str],
    tolerances: Mapping[str, Mapping[str, float]],
    optional_metrics: Mapping[str, Iterable[str]],
    cases: Mapping[str, Any],
    not_gating: Mapping[str, str] | None = None,
    run: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``gate_policy`` block. ``thresholds``: the gated metrics (``{op: value}``) the run computed;
    ``computed``: every metric it computed; ``settings``: the gate settings by name (``GATE_SETTINGS``);
    ``tolerances``: resolved ``regression_tolerance`` (``{abs, rel}``); ``optional_metrics`` by suite
    (``""``: evalgate.yaml's); ``cases``: ``CaseSet.as_dict()``; ``not_gating``: judged metrics whose judge
    may not gate (calibration), with the reason; ``run``: the ``RUN_SETTINGS`` (``repeat``, ``answer_source``
    ``{target, identity}``, ``judge`` ``{provider, model, base_url, temperature, temperatures, samples, seed,
    output}``, ``simulator``, ``metric_definitions`` (name → digest), ``suites`` (name → digest, ``""``:
    evalgate.yaml's), ``max_answer_chars``, ``traces``, ``pairwise``, ``directions`` (metric →
    ``higher``/``lower``), ``adaptive`` (``{on, budget, critical_pass_probability}``))."""
    gated = {name: dict(t) for name, t in sorted(thresholds.items())}
    return {
        "version": POLICY_VERSION,
        "thresholds": gated,
        "threshold_origins": dict(sorted(threshold_origins.items())),
        "ungated": sorted(set(computed) - set(gated)),
        **{name: settings.get(name) for name in GATE_SETTINGS},
        "regression_tolerance": {name: dict(t) for name, t in sorted(tolerances.items())},
        "optional_metrics": {suite: sorted(names) for suite, names in sorted(optional_metrics.items()) if names},
        "origins": {name: origins[name] for name in sorted(origins)},
        "cases": dict(cases),
        **({"not_gating": dict(sorted(not_gating.items()))} if not_gating else {}),
        **{name: (run or {})[name] for name in RUN_SETTINGS if name in (run or {})},
    }


GATE_SETTINGS = ("gate_changes", "significance_level", "fail_on_regression", "strict_metrics", "fail_on_critical",
                 "min_pass_rate", "max_errored", "repeat_rule", "calibration", "calibration_min_kappa",
                 "calibration_min_labels", "calibration_floors", "controls_max_items", "no_gate", "selection")
"""Settings recorded in the snapshot (``selection``: ``case_ids`` count, ``first_n``, ``category``, ``tags``,
``shard`` when the checkout's evalgate.yaml chose it)."""
RUN_SETTINGS = ("repeat", "answer_source", "judge", "simulator", "metric_definitions", "suites", "max_answer_chars",
                "traces", "pairwise", "directions", "adaptive")
"""What else a snapshot records that can change a verdict (``snapshot``'s ``run``)."""


def loosenings(base: Mapping[str, Any] | None, head: Mapping[str, Any],
               removed: list[str] | None = None, *, cases: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every way ``head``'s policy is easier to pass than ``base``'s, one entry each: ``kind``, ``setting``,
    ``before``, ``after``, ``origin`` (where head's value was set, when known) and ``text`` (one line).
    ``removed``: the base's case ids missing from the head run when known exactly (the comparison's
    ``cases.removed``), else they are taken from the snapshots. ``cases``: the comparison's ``cases`` block
    (``edited``, ``demoted``, ``located``: exact at any number of cases); without it critical cases are
    compared from the snapshots. ``base`` None → ``[]`` (see ``unknown``)."""
    if not isinstance(base, Mapping):
        return []
    found: list[dict[str, Any]] = []
    origins = head.get("origins") or {}

    def add(kind: str, setting: str, before: Any, after: Any, text: str, origin: str | None = None) -> None:
        where = origin if origin is not None else origins.get(setting)
        found.append({"kind": kind, "setting": setting, "before": before, "after": after,
                      "origin": where, "text": text + (f" ({where})" if where else "")})

    _thresholds(base, head, add)
    _settings(base, head, add)
    _tolerances(base, head, add)
    _optional(base, head, add)
    _run_settings(base, head, add)
    _cases(base, head, removed, add, cases if isinstance(cases, Mapping) else {})

    for item in calibration_loosenings(base, head):  # a calibration file the pull request added or edited
        add("calibration_changed", item["setting"], item["before"], item["after"], item["text"], item["origin"])
    return found


def unknown(base: Mapping[str, Any] | None) -> bool:
    """True when the base run recorded no policy (an older evalgate): "gate policy of the base run unknown"."""
    return not isinstance(base, Mapping) or not isinstance(base.get("thresholds"), Mapping)


def effective_gate_changes(head_value: str, *, from_workflow: bool, untrusted: bool, base_value: str | None) -> str:
    """``gate_changes`` as it applies. In a pull-request run only the workflow (an input, ``EVALGATE_*``, a
    flag: ``from_workflow``) may relax the base run's value: one written in the PR's own evalgate.yaml, or the
    default left by deleting that line, only tightens it (the base run's ``fail`` stays ``fail``)."""
    if untrusted and not from_workflow and base_value == "fail":
        return "fail"
    return head_value if head_value in GATE_CHANGES else "report"


def approval(labels: Iterable[str], label: str) -> str | None:
    """``label`` when the pull request carries it (GitHub compares label names case-insensitively)."""
    wanted = label.strip().lower()
    return label if wanted and any(str(name).strip().lower() == wanted for name in labels) else None


def dataset_line(cases: Mapping[str, Any]) -> dict[str, Any] | None:
    """The comparison's ``cases`` block as ``{added, edited, removed, text}``: one line naming the first
    ``EXAMPLES`` cases of each change with ``file:line``; None when nothing changed."""
    raw = cases.get("located")
    located: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    lists = {key: [str(i) for i in cases.get(key) or []] for key in ("new", "edited", "removed")}
    if not any(lists.values()):
        return None
    parts = [f"{len(ids)} case(s) {label}: {_listed(ids, located)}"
             for label, ids in (("added", lists["new"]), ("with edited expectations", lists["edited"]),
                                ("removed", lists["removed"])) if ids]
    return {"added": len(lists["new"]), "edited": len(lists["edited"]), "removed": len(lists["removed"]),
            "text": "dataset changes against the base run: " + "; ".join(parts)}


def gate_reason(loosened: list[dict[str, Any]], label: str) -> str:
    """The one gate reason for loosenings under ``gate_changes: fail``."""
    listed = "; ".join(item["text"] for item in loosened[:3])
    more = f"; +{len(loosened) - 3} more" if len(loosened) > 3 else ""
    return (f"this pull request loosens the gate ({listed}{more}); gate_changes is fail: a maintainer can approve "
            f"with the label {label!r}")


# --- the comparisons -----------------------------------------------------------------------------------------

def _bound(threshold: Any) -> tuple[str, float] | None:
    if not isinstance(threshold, Mapping):
        return None
    for op, value in threshold.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(op), float(value)
    return None


def _text(threshold: tuple[str, float]) -> str:
    return f"{threshold[0]} {threshold[1]:g}"


def at_least_as_strict(base: tuple[str, float], head: tuple[str, float]) -> bool:
    """True when every value ``head`` admits, ``base`` admits too (same side; equal values: ``gt`` ⊂ ``min``)."""
    (b_op, b), (h_op, h) = base, head
    if (b_op in LOWER_OPS) != (h_op in LOWER_OPS):
        return False
    if h != b:
        return h > b if b_op in LOWER_OPS else h < b
    return h_op == b_op or h_op in ("gt", "lt")


def _thresholds(base: Mapping[str, Any], head: Mapping[str, Any], add: Any) -> None:
    before, after = base.get("thresholds") or {}, head.get("thresholds") or {}
    where = head.get("threshold_origins") or {}
    computed = set(head.get("ungated") or ())
    for name in sorted(before):
        old = _bound(before[name])
        if old is None:
            continue
        new = _bound(after.get(name))
        if new is None:
            not_gating = head.get("not_gating") or {}
            why = (f"its judge does not gate ({not_gating[name]})" if name in not_gating
                   else "its threshold was removed" if name in computed else "no longer computed")
            add("ungated", name, _text(old), None, f"{name} no longer gated: was {_text(old)}, {why}",
                origin=where.get(name, ""))
        elif not at_least_as_strict(old, new):
            add("threshold", name, _text(old), _text(new), f"{name} {_text(old)} → {_text(new)}",
                origin=where.get(name, ""))


def _flag(value: Any) -> str:
    return "on" if value else "off"


def _settings(base: Mapping[str, Any], head: Mapping[str, Any], add: Any) -> None:
    def both(name: str) -> tuple[Any, Any] | None:
        if name not in base or name not in head:
            return None
        return base[name], head[name]

    for name in ("fail_on_regression", "strict_metrics", "fail_on_critical"):
        pair = both(name)
        if pair and pair[0] is True and pair[1] is False:
            add("switched_off", name, True, False, f"{name} {_flag(True)} → {_flag(False)}")
    pair = both("significance_level")  # a lower α finds fewer regressions
    if pair and _num(pair[0]) is not None and _num(pair[1]) is not None and pair[1] < pair[0]:
        add("significance_level", "significance_level", pair[0], pair[1],
            f"significance_level (α) {pair[0]:g} → {pair[1]:g} (fewer regressions found)")
    pair = both("min_pass_rate")
    if pair and _num(pair[0]) is not None and (_num(pair[1]) is None or pair[1] < pair[0]):
        add("min_pass_rate", "min_pass_rate", pair[0], pair[1],
            f"min_pass_rate {pair[0]:g} → {'none' if pair[1] is None else format(pair[1], 'g')}")
    pair = both("max_errored")
    if pair and _num(pair[0]) is not None and _num(pair[1]) is not None and pair[1] > pair[0]:
        add("max_errored", "max_errored", pair[0], pair[1], f"max_errored {pair[0]} → {pair[1]}")
    pair = both("repeat_rule")
    if pair and REPEAT_STRICTNESS.get(str(pair[1]), 1) < REPEAT_STRICTNESS.get(str(pair[0]), 1):
        add("repeat_rule", "repeat_rule", pair[0], pair[1], f"repeat_rule {pair[0]} → {pair[1]}")
    pair = both("gate_changes")
    if pair and pair[0] == "fail" and pair[1] != "fail":
        add("gate_changes", "gate_changes", pair[0], pair[1], f"gate_changes {pair[0]} → {pair[1]}")
    _calibration(base, head, add)
    pair = both("no_gate")
    if pair and _no_gate_fails(pair[0], base.get("calibration")) and not _no_gate_fails(pair[1], head.get("calibration")):
        add("no_gate", "no_gate", pair[0], pair[1], f"no_gate {pair[0]} → {pair[1]} (a run nothing decided passes)")
    pair = both("selection")
    if pair and isinstance(pair[1], Mapping):
        old = pair[0] if isinstance(pair[0], Mapping) else {}
        for key, value in sorted(pair[1].items()):
            if value and value != old.get(key):
                shown = f"{value} id(s)" if key == "case_ids" else f"{value} (part of the cases)" if key == "shard" \
                    else value
                add("selection", key, old.get(key), value, f"cases selected by {key}: {shown}")


def _no_gate_fails(value: Any, calibration: Any) -> bool:
    """Whether ``no_gate`` fails a run that nothing decided (``auto``: under ``calibration: required``)."""
    return value == "fail" or (value == "auto" and calibration == "required")


def _calibration(base: Mapping[str, Any], head: Mapping[str, Any], add: Any) -> None:
    old, new = base.get("calibration"), head.get("calibration")
    if old is not None and new is not None and old != new and new != "required":
        meaning = {"off": "human labels not read: a judge gates on its controls, or unchecked where none can be built",
                   "trust": "every judge gates, unchecked",
                   "auto": "a judge without human labels gates on its controls"}.get(str(new), "")
        add("calibration", "calibration", old, new, f"calibration {old} → {new}" + (f" ({meaning})" if meaning else ""))
    for key in ("calibration_min_kappa", "calibration_min_labels"):
        a, b = _num(base.get(key)), _num(head.get(key))
        if a is not None and b is not None and b < a:
            add("calibration", key, a, b, f"{key} {a:g} → {b:g}")
    a, b = _num(base.get("controls_max_items")), _num(head.get("controls_max_items"))
    if a is not None and b is not None and b > a:  # more controls admit a weak judge more often (docs/judge-calibration.md)
        add("calibration", "controls_max_items", a, b,
            f"controls_max_items {a:g} → {b:g} (more controls admit a judge of κ 0.4 more often)")
    old_floors, new_floors = base.get("calibration_floors") or {}, head.get("calibration_floors") or {}
    for name in sorted(old_floors):
        for key, value in sorted((old_floors.get(name) or {}).items()):
            now = (new_floors.get(name) or {}).get(key)
            if _num(value) is not None and (_num(now) is None or now < value):
                add("calibration", "calibration_floors", value, now,
                    f"calibration floor {name}.{key} {value:g} → {'default' if now is None else format(now, 'g')}")


def _tolerances(base: Mapping[str, Any], head: Mapping[str, Any], add: Any) -> None:
    if "regression_tolerance" not in base:
        return
    before, after = base.get("regression_tolerance") or {}, head.get("regression_tolerance") or {}
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name) or {}, after.get(name) or {}
        wider = [key for key in ("abs", "rel") if float(new.get(key, 0.0)) > float(old.get(key, 0.0))]
        if wider:
            shown = ", ".join(f"{key} {float(old.get(key, 0.0)):g} → {float(new.get(key, 0.0)):g}" for key in wider)
            add("regression_tolerance", "regression_tolerance", old, new,
                f"regression_tolerance of {name} widened: {shown}")


def _optional(base: Mapping[str, Any], head: Mapping[str, Any], add: Any) -> None:
    if "optional_metrics" not in base:
        return
    before, after = base.get("optional_metrics") or {}, head.get("optional_metrics") or {}
    shared_before = set(before.get("", ()))
    for suite in sorted(after):
        added = sorted(set(after[suite]) - set(before.get(suite, ())) - shared_before)
        if added:
            scope = f"suite {suite}" if suite else "evalgate.yaml"
            add("optional_metrics", "optional_metrics", sorted(before.get(suite, ())), sorted(after[suite]),
                f"optional_metrics adds {', '.join(added)} ({scope}): cases lacking it no longer error")


def _ids_text(ids: list[str], count: int) -> str:
    shown = ", ".join(ids[:EXAMPLES])
    more = count - min(len(ids), EXAMPLES)
    return shown + (f" (+{more} more)" if more > 0 else "")


def _located(case_id: str, located: Mapping[str, Any]) -> str:
    where = located.get(case_id)
    return f"{case_id} ({where})" if where else case_id


def _listed(ids: list[str], located: Mapping[str, Any]) -> str:
    return _ids_text([_located(i, located) for i in ids[:EXAMPLES]], len(ids))


def _cases(base: Mapping[str, Any], head: Mapping[str, Any], removed: list[str] | None, add: Any,
           exact: Mapping[str, Any]) -> None:
    old, new = base.get("cases"), head.get("cases")
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return
    raw = exact.get("located")
    located: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    old_ids, new_ids = old.get("ids"), new.get("ids")
    if removed is None and old_ids is not None and new_ids is not None:
        removed = sorted(set(old_ids) - set(new_ids))
    if removed:
        add("cases_missing", "dataset", len(removed), None,
            f"{len(removed)} case(s) of the base run missing from this run: {_listed(removed, located)}",
            origin="")
    elif removed is None and (old.get("count", 0) > new.get("count", 0) or (
            old.get("count") == new.get("count") and old.get("digest") != new.get("digest"))):
        add("cases_missing", "dataset", old.get("count"), new.get("count"),
            f"the case set changed: {old.get('count')} case(s) in the base run, {new.get('count')} here "
            "(too many to list which)", origin="")
    edited = exact.get("edited")
    if isinstance(edited, list) and edited:
        add("expectations_edited", "dataset", len(edited), None,
            f"{len(edited)} case(s) with edited expectations (expected values, rules, assert, metrics, suite or "
            f"risk level): {_listed([str(i) for i in edited], located)}", origin="")
    demoted_exact = exact.get("demoted")
    if isinstance(demoted_exact, list) and demoted_exact:  # from the case records: exact at any count
        add("critical_demoted", "risk_level", len(demoted_exact), None,
            f"{len(demoted_exact)} case(s) no longer risk_level critical: "
            f"{_listed([str(i) for i in demoted_exact], located)}", origin="")
        return
    old_crit, new_crit = old.get("critical") or {}, new.get("critical") or {}
    gone = set(removed or ())
    base_critical, head_critical = old_crit.get("ids"), new_crit.get("ids")
    if base_critical is not None and head_critical is not None and (new_ids is not None or removed is not None):
        present = set(new_ids) if new_ids is not None else None
        demoted = sorted(i for i in set(base_critical) - set(head_critical)
                         if i not in gone and (present is None or i in present))
        if demoted:
            add("critical_demoted", "risk_level", len(demoted), None,
                f"{len(demoted)} case(s) no longer risk_level critical: {_ids_text(demoted, len(demoted))}", origin="")
    elif int(new_crit.get("count", 0)) < int(old_crit.get("count", 0)) or (
            new_crit.get("count") == old_crit.get("count") and new_crit.get("digest") != old_crit.get("digest")):
        add("critical_demoted", "risk_level", old_crit.get("count"), new_crit.get("count"),
            f"critical cases {old_crit.get('count')} → {new_crit.get('count')}"
            + (" (another set of ids)" if new_crit.get("count") == old_crit.get("count") else ""), origin="")


def _run_settings(base: Mapping[str, Any], head: Mapping[str, Any], add: Any) -> None:
    """The ``RUN_SETTINGS`` comparisons (each only when both snapshots recorded the setting)."""
    if "repeat" in base and "repeat" in head:
        b, h, rule = _num(base["repeat"]), _num(head["repeat"]), str(head.get("repeat_rule") or "majority")
        if b is not None and h is not None and (h > b if rule == "any" else h < b):
            add("repeat", "repeat", int(b), int(h), f"repeat {int(b)} → {int(h)} (repeat_rule {rule}: "
                + ("more tries to pass)" if rule == "any" else "fewer tries to show a flaky case)"))
    _answer_source(base.get("answer_source"), head.get("answer_source"), add)
    _judge(base.get("judge"), head.get("judge"), add)
    old_sim, new_sim = base.get("simulator"), head.get("simulator")
    if "simulator" in base and "simulator" in head and old_sim != new_sim:
        add("simulator", "simulator_model", old_sim, new_sim, f"simulated user model {old_sim} → {new_sim}")
    for key, what in (("metric_definitions", "metric {name}'s definition changed ({where})"),
                      ("suites", "{scope}'s metric settings changed (metrics, exclude_metrics, options, "
                                 "category_metrics, kind or valid)")):
        before, after = base.get(key), head.get(key)
        if not isinstance(before, Mapping) or not isinstance(after, Mapping):
            continue
        for name in sorted(set(before) & set(after)):
            old_entry, new_entry = before[name], after[name]
            old_digest = old_entry.get("digest") if isinstance(old_entry, Mapping) else old_entry
            new_digest = new_entry.get("digest") if isinstance(new_entry, Mapping) else new_entry
            if old_digest != new_digest:
                where = new_entry.get("origin", "") if isinstance(new_entry, Mapping) else ""
                scope = f"suite {name}" if name else "evalgate.yaml"
                add("definition" if key == "metric_definitions" else "suite", key, old_digest, new_digest,
                    what.format(name=name, where=where or "its code or declaration", scope=scope), origin="")
    _directions(base.get("directions"), head.get("directions"), add)
    _adaptive(base.get("adaptive"), head.get("adaptive"), add)
    b, h = _num(base.get("max_answer_chars")), _num(head.get("max_answer_chars"))
    if b is not None and h is not None and h > b:
        add("max_answer_chars", "max_answer_chars", int(b), int(h),
            f"max_answer_chars {int(b)} → {int(h)} (longer answers are scored instead of errored)")
    for key, meaning in (("traces", "trajectory cases are checked from the answer's own tool list"),
                         ("pairwise", "the judge's pairwise tests leave the regression decision")):
        if base.get(key) is True and head.get(key) is False:
            add("switched_off", key, True, False, f"{key} on → off ({meaning})")


def _directions(old: Any, new: Any, add: Any) -> None:
    """A metric whose better direction (``higher``/``lower``) differs from the base run's: the comparison with
    the base would read a rise the other way (a worse error rate as an improvement), so it is listed either way."""
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return
    for name in sorted(set(old) & set(new)):
        if old[name] != new[name]:
            rise = "an improvement" if new[name] == "higher" else "a regression"
            add("direction", "direction", old[name], new[name],
                f"metric {name}'s direction {old[name]} → {new[name]} (a rise now counts as {rise})", origin="")


def _adaptive(old: Any, new: Any, add: Any) -> None:
    """``repeat: adaptive`` turned on (uncertain and critical cases re-tried until a sequential test clears them:
    more tries to pass than the base's fixed repeats) or, under it, a lower ``critical_pass_probability`` (a
    critical case cleared at a lower pass rate). The budget is recorded, not compared (trials, % or $)."""
    if not isinstance(old, Mapping) or not isinstance(new, Mapping) or not new.get("on"):
        return
    if not old.get("on"):
        add("adaptive", "repeat", "fixed", "adaptive", "repeat: adaptive (uncertain and critical cases re-tried "
            "until a sequential test clears them; the base run repeated a fixed number of times)")
        return
    b, h = _num(old.get("critical_pass_probability")), _num(new.get("critical_pass_probability"))
    if b is not None and h is not None and h < b:
        add("adaptive", "critical_pass_probability", b, h,
            f"critical_pass_probability {b:g} → {h:g} (a critical case is cleared at a lower pass rate)")


def _answer_source(old: Any, new: Any, add: Any) -> None:
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return
    b, h = str(old.get("target")), str(new.get("target"))
    if b != "recorded" and h == "recorded":
        add("answer_source", "target", b, h, f"target {b} → recorded: the answers are read from files instead of "
                                             f"the live system")
    elif b != h:
        add("answer_source", "target", b, h, f"target {b} → {h}: the answers come from another system")
    elif old.get("identity") != new.get("identity"):
        what = "the outputs file" if h == "recorded" else "its endpoint, command, model or response mapping"
        add("answer_source", "target", old.get("identity"), new.get("identity"),
            f"target {h}: the answers come from elsewhere ({what} changed)")


JUDGE_KEYS = ("model", "base_url", "temperature", "temperatures", "samples", "seed", "output")


def _judge(old: Any, new: Any, add: Any) -> None:
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return
    b, h = str(old.get("provider")), str(new.get("provider"))
    if b != "none" and h == "none":
        add("judge", "judge_provider", b, h, f"judge_provider {b} → none: judged metrics are skipped, not scored")
        return
    if b == "none" or h == "none":
        return
    changed = [f"provider {b} → {h}"] if b != h else []
    changed += [f"{key} {_shown(old.get(key))} → {_shown(new.get(key))}" for key in JUDGE_KEYS
                if old.get(key) != new.get(key)]
    if changed:
        add("judge", "judge", {k: old.get(k) for k in ("provider", *JUDGE_KEYS)},
            {k: new.get(k) for k in ("provider", *JUDGE_KEYS)},
            "another judge: " + ", ".join(changed) + " (its scores are not the base's evidence)")


def _shown(value: Any) -> str:
    if value is None:
        return "default"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {v}" for k, v in sorted(value.items())) + "}" if value else "{}"
    return format(value, "g") if isinstance(value, float) else str(value)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
