"""What identifies a judge configuration for calibration, and scoring one labelled example with it.

The calibration key of a judged metric hashes everything that changes its verdicts (as the judge cache keys
replies: ``store.judge_cache``, ``JudgeClient._key``): provider, model, the template version (``name@`` + hash
of the template, everything it includes and the system message), the criteria/rubric/steps of a declared
metric, a configured rubric (``response_quality_rubric``), the metric's temperature, ``judge_samples`` and the
judge's endpoint (``endpoint_of``: the base URL normalised — scheme and host lower-cased, default port, user,
password, query and fragment dropped, no trailing ``/`` — with a server on this machine (127.0.0.0/8, ::1,
``localhost``) written ``loopback`` without its port, which changes between runs). A model name is what an
endpoint says it serves, so a calibration measured at one endpoint never admits whatever answers at another.
A calibration stored under one key never vouches for another: any changed part makes it stale.
"""

from __future__ import annotations

import hashlib
import inspect
import ipaddress
import json
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from evalgate.judges import prompts  # called through the module: a test swaps prompts.template_version
from evalgate.judges.custom import CRITERIA_FILE, STEPS_FILE
from evalgate.judges.pairwise import PAIRWISE_FILE
from evalgate.metrics.registry import MetricContext
from evalgate.model import MetricSkipped, MetricUnavailable
from evalgate.targets.recorded import answer_from_case

if TYPE_CHECKING:
    from evalgate.judges.client import JudgeClient
    from evalgate.metrics.registry import Metric
    from evalgate.model import Case

KEY_PARTS = ("provider", "model", "endpoint", "template", "criteria", "rubric", "temperature", "samples")
LOOPBACK_HOSTS = frozenset({"localhost", "::1", "ip6-localhost"})
DEFAULT_PORTS = {"http": 80, "https": 443}


def endpoint_of(base_url: str | None) -> str | None:
    """The judge endpoint as the calibration key records it (module docstring); None when there is no URL.
    ``HTTPS://user:pw@API.Example.com:443/v1/?x=1`` → ``https://api.example.com/v1``;
    ``http://127.0.0.1:8012/v1`` → ``http://loopback/v1``."""
    if not base_url or not str(base_url).strip():
        return None
    parts = urlsplit(str(base_url).strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower().rstrip(".")
    try:
        port = parts.port
    except ValueError:
        port = None
    try:
        loopback = host in LOOPBACK_HOSTS or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if loopback:
        netloc = "loopback"
    else:
        shown = f"[{host}]" if ":" in host else host
        netloc = shown if port is None or DEFAULT_PORTS.get(scheme) == port else f"{shown}:{port}"
    path = parts.path.rstrip("/")
    return f"{scheme}://{netloc}{path}"


def key_parts(judge: JudgeClient, metric: Metric, options: Any) -> dict[str, Any]:
    """The parts of ``metric``'s calibration key under ``judge`` and the suite ``options``."""
    parts: dict[str, Any] = {"provider": judge.provider, "model": judge.model,
                             "endpoint": endpoint_of(getattr(judge, "base_url", None))}
    try:
        template = None if metric.info is not None else prompts.template_for_metric(metric.name)
    except KeyError:  # judged through criteria.j2 without a declaration record (the built-in conversation metrics)
        template = None
    if template is None:  # a criteria metric: its definition (or, built in, its description) is part of the prompt
        parts["template"] = f"{prompts.template_version(CRITERIA_FILE)}+{prompts.template_version(STEPS_FILE)}"
        info = metric.info if isinstance(metric.info, dict) else {"description": metric.description}
        parts["criteria"] = {k: v for k, v in sorted(info.items()) if k not in ("origin", "where", "source")}
        template_name = "criteria_" + metric.name
    else:
        parts["template"] = prompts.template_version(template.file)
        parts["criteria"] = None
        template_name = template.name
    rubric = getattr(options, "response_quality_rubric", None) if metric.name == "response_quality" else None
    parts["rubric"] = rubric or None
    parts["temperature"] = judge.temperature_for(template_name)
    parts["samples"] = judge.samples
    return parts


def pairwise_key_parts(judge: JudgeClient, metric: Metric, options: Any) -> dict[str, Any]:
    """The key parts of ``metric``'s pairwise judging (``judges.pairwise``): its own, with the pairwise template's
    version and temperature."""
    parts = key_parts(judge, metric, options)
    parts["template"] = f"{prompts.template_version(PAIRWISE_FILE)} for {parts['template']}"
    parts["temperature"] = judge.temperature_for("pairwise")
    return parts


def key_of(parts: dict[str, Any]) -> str:
    """16 hex digits of sha256 over the parts (canonical JSON)."""
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def judge_label(parts: dict[str, Any], metric: str, key: str) -> str:
    """How messages name a judge configuration: ``gpt-4o-mini@policy-3f2a1c…``."""
    return f"{parts.get('model')}@{metric}-{key[:6]}…"


def changed_parts(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The key parts that differ between two configurations (in ``KEY_PARTS`` order)."""
    return [name for name in KEY_PARTS if old.get(name) != new.get(name)]


async def score_example(judge: JudgeClient, metric: Metric, case: Case, options: Any
                        ) -> tuple[float | None, str, str | None]:
    """The judge's value for one labelled example (its recorded answer): ``score_answer``."""
    return await score_answer(judge, metric, case, answer_from_case(case), options)


async def score_answer(judge: JudgeClient, metric: Metric, case: Case, answer: Any, options: Any
                       ) -> tuple[float | None, str, str | None]:
    """The judge's value for ``answer`` to ``case``: (value, reasoning, problem). A heuristic fallback
    (``response_quality`` without a verdict) is no judge value: (None, "", why)."""
    ctx = MetricContext(options, judge=judge)
    try:
        result = metric.fn(case, answer, ctx)
        score = await result if inspect.isawaitable(result) else result
    except (MetricSkipped, MetricUnavailable) as exc:
        return None, "", str(exc)
    details = dict(score.details or {})
    if "judge_unavailable" in details or details.get("method") == "heuristic":
        return None, "", str(details.get("judge_unavailable") or "scored by the heuristic, not the judge")
    return float(score.value), str(details.get("reasoning") or ""), None
