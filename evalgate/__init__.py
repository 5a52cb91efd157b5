"""evalgate: gate pull requests on the quality of LLM and agent systems.

The Python API (docs/custom-metrics.md, docs/python-api.md): ``run``, ``validate`` and ``compare``
(synchronous; keyword arguments are the settings), the ``metric`` decorator for code checks, the ``Score``
a check may return, the ``CaseView`` / ``AnswerView`` a check receives, the ``Answer`` a custom target
returns, the result types and ``UserError``. Everything is imported on first use, so ``import evalgate``
(and ``evalgate --version``) stays fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "1.0.0"
__all__ = [
    "Answer",
    "AnswerView",
    "CaseView",
    "ComparisonResult",
    "RunResult",
    "Score",
    "UserError",
    "ValidationResult",
    "__version__",
    "compare",
    "metric",
    "run",
    "validate",
]

_LAZY = {
    "run": "evalgate.runner.api",
    "validate": "evalgate.runner.api",
    "compare": "evalgate.runner.api",
    "RunResult": "evalgate.runner.api",
    "ValidationResult": "evalgate.runner.api",
    "ComparisonResult": "evalgate.runner.api",
    "metric": "evalgate.metrics.checks",
    "CaseView": "evalgate.dataset.views",
    "AnswerView": "evalgate.dataset.views",
    "Score": "evalgate.model",
    "Answer": "evalgate.model",
    "UserError": "evalgate.errors",
}

def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'evalgate' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
