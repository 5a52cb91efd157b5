"""What a run lacks before it starts: a judge provider's API key (``judge_missing``, docs/fork-pull-requests.md).
(Answers for the default recorded target: ``dataset.selected.check_answers_recorded``.)

A pull request from a fork, or one Dependabot opened, gets no repository secrets: ``judge-provider: openai``
then has no ``OPENAI_API_KEY``. ``skip`` (the default on those runs) runs without the judge: each judged
metric is reported ``skipped`` with :func:`not_judged_reason` as its reason, a case that only a judged
metric could decide is ``skipped`` too (never ``passed``: ``verdict.gate.case_verdict``), the rest of the
gate decides, and a run where nothing was left to decide fails (``verdict.gate.nothing_decided_reason``). ``fail`` (the
default elsewhere) stops before any case runs, exit 2, naming the key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalgate.calls.providers import missing_key
from evalgate.config.trust import from_checkout, untrusted_checkout, without_secrets
from evalgate.errors import UserError
from evalgate.verdict.aggregate import NOT_JUDGED

if TYPE_CHECKING:
    from evalgate.config.settings import Settings



def judge_missing_mode(settings: Settings) -> tuple[str, str | None]:
    """``("skip" | "fail", why the run has no secrets or None)``. ``auto`` (and, in a pull-request run, a value
    from the PR's own evalgate.yaml, which the PR's author wrote) is skip exactly when the run gets no
    secrets (``config.trust.without_secrets``)."""
    env = settings.environment
    why = without_secrets(env)
    mode = settings.judge_missing
    if mode != "auto" and untrusted_checkout(env) and from_checkout(settings.origin("judge_missing"), settings.config):
        mode = "auto"
    if mode == "auto":
        mode = "skip" if why else "fail"
    return mode, why


def not_judged_reason(settings: Settings) -> str | None:
    """The reason judged metrics carry when the configured judge's key is absent and ``judge_missing`` says
    skip, or None (a judge is configured with its key, or none is configured). Raises ``UserError`` (exit 2)
    when the key is absent and the mode is fail."""
    if settings.judge_provider == "none":
        return None
    needed = missing_key(settings.judge_provider, settings.environment, settings.judge_api_key)
    if needed is None:
        return None
    mode, why = judge_missing_mode(settings)
    if mode == "fail":
        raise UserError(f"provider {settings.judge_provider!r} needs an API key: set {needed} (or judge-missing: "
                        "skip to run without the judge: judged metrics are then reported as not judged)",
                        where=settings.origin("judge_provider") or "judge_provider")
    return f"{NOT_JUDGED}: no {needed} in this run" + (f" ({why})" if why else "") + " and judge-missing is skip"
