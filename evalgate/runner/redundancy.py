"""Warnings for repetition that costs without telling anything: ``judge_samples`` K > 1 at
``judge_temperature`` 0, and ``repeat`` N > 1 of a target that answers the same every time.

* Judge samples: a judge at temperature 0 (with the run's seed) gives the same verdict K times, so
  K − 1 of every K judge calls are redundant: ``judge_calls · (K − 1) / K`` calls, and the same share
  of the estimated judge cost (an upper bound when some planned judged metrics have a temperature of
  their own in ``judge_temperatures``). Warned before the run, naming the metrics at temperature 0.
* Repeats of recorded answers (identical by construction) or of the model target (always called at
  temperature 0): warned before the run; ``(N − 1) / N`` of the model and judge calls are redundant.
* Repeats of an http or command target: whether it is deterministic is only known afterwards; when
  every case got the same answer text on all its repeats, the run warns that the N − 1 extra rounds
  (their target and judge calls) showed nothing (``IdenticalRepeats`` watches the results).

The warnings are printed on stderr (``evalgate: warning: …``), kept in results.json under
``metadata.warnings`` and, in the Action, emitted as ``::warning`` annotations.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalgate.config.sections import AnswerSettings, JudgeSettings
    from evalgate.model import CaseResult


def _share(total: float, count: int) -> float:
    """The redundant part of ``total`` when ``count`` repetitions would do the work of one."""
    return total * (count - 1) / count


def _cost(estimate: Mapping[str, Any] | None, calls_key: str, count: int, bound: str = "") -> str:
    """`` (~N of the estimated M … calls; of the ~$Y estimate, ~$X)`` from the estimate, or ``""``;
    ``bound`` ("up to ") when only part of the calls may be redundant."""
    if not estimate or not estimate.get(calls_key):
        return ""
    calls = round(_share(estimate[calls_key], count))
    text = f"{bound}~{calls} of the estimated {estimate[calls_key]} {calls_key.replace('_', ' ')}"
    cost = estimate.get("cost_usd")
    if cost:
        text += f"; of the ~${cost:.4f} estimate, ~${_share(cost, count):.4f}"
    return f" ({text})"


def upfront_warnings(answering: AnswerSettings, judging: JudgeSettings, target_kind: str, judged: bool,
                     estimate: Mapping[str, Any] | None, cold_metrics: Sequence[str] = ()) -> list[str]:
    """The warnings known before the run (see the module docstring); ``judged``: a judge is configured;
    ``cold_metrics``: the planned judged metrics that run at temperature 0 (``judge_temperature`` or
    their ``judge_temperatures`` entry)."""
    warnings: list[str] = []
    samples, repeat = judging.judge_samples, answering.repeat
    if judged and samples > 1 and cold_metrics:
        every = "" if judging.judge_temperature == 0 and not judging.judge_temperatures else "up to "
        warnings.append(
            f"judge_samples {samples} at temperature 0 ({', '.join(cold_metrics)}): a judge at temperature 0 gives "
            f"the same verdict {samples} times, so {samples - 1} of every {samples} of those judge calls are paid "
            f"for nothing{_cost(estimate, 'judge_calls', samples, every)}; raise judge_temperature (or their "
            "judge_temperatures) to measure judge spread, or set judge_samples 1")
    if repeat > 1 and (target_kind == "openai" or (target_kind == "recorded" and judged)):
        why = ("recorded answers are the same on every repeat" if target_kind == "recorded"
               else "the model target is called at temperature 0, so its answers barely vary")
        calls = "judge" if target_kind == "recorded" else "model and judge"
        costs = _cost(estimate, "target_calls", repeat) if target_kind == "openai" else ""
        if judged and target_kind == "recorded":
            costs = _cost(estimate, "judge_calls", repeat)
        warnings.append(
            f"repeat {repeat}: {why}; {repeat - 1} of every {repeat} rounds repeat the same {calls} work "
            f"without showing any flakiness{costs}")
    return warnings


class IdenticalRepeats:
    """Sink: whether every case got the same answer text (or the same error) on all of its repeats."""

    def __init__(self, repeat: int) -> None:
        self.repeat = repeat
        self.first: dict[str, bytes] = {}
        self.varied = False
        self.results = 0

    def add(self, result: CaseResult) -> None:
        if self.repeat < 2 or self.varied:
            return
        self.results += 1
        text = result.output if result.error is None else f"error: {result.error}"
        digest = hashlib.blake2b((text or "").encode("utf-8", "surrogatepass"), digest_size=16).digest()
        key = f"{result.index}\x00{result.id}"
        seen = self.first.setdefault(key, digest)
        if seen != digest:
            self.varied = True
            self.first.clear()

    def warning(self, target_kind: str, judged: bool, target_calls: int, judge_calls: int) -> str | None:
        """The after-the-run warning for an http or command target, or None."""
        if self.repeat < 2 or self.varied or target_kind not in ("http", "command") or not self.first:
            return None
        if self.results < len(self.first) * self.repeat:  # stopped early: not every case was repeated
            return None
        spent = [f"{round(_share(target_calls, self.repeat))} target calls"]
        if judged and judge_calls:
            spent.append(f"{round(_share(judge_calls, self.repeat))} judge calls")
        return (f"repeat {self.repeat}: every case got the same answer on all {self.repeat} repeats (a deterministic "
                f"target, e.g. a model at temperature 0?); the {self.repeat - 1} extra round(s) cost "
                f"{' and '.join(spent)} and cannot show flakiness")
