"""Verbs beyond run/validate: compare, merge, history, report. Each registers a sub-parser with
``set_defaults(func=...)``; the handler returns the exit status."""

from __future__ import annotations

import argparse
from typing import Any

VERBS: list[Any] = []
_ = argparse
