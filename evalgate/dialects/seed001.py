"""Seed 001 (brand-mention extraction fixtures) as a dialect.

Its metrics (mention precision/recall/F1, rank accuracy, brand coverage, false is_mine rate) run on the
brand fields in any suite, since those fields ask for them; what is seed 001's alone lives at the edges:
the ``test_cases:`` wrapper and ``intent_id`` / ``llm_answer_text`` spellings (``native_format``), the
``evalgate eval`` verb, its JSON document and console summary (``report/compat.py``) and its SQLite tables
(``store/schema.py``).
"""

from __future__ import annotations

from evalgate.dialects import Dialect

DIALECT = Dialect(
    name="seed001",
    label="seed 001 (brand mentions)",
    elsewhere="evalgate eval, seed001-summary.json in report/compat.py, eval_runs/eval_results in store/schema.py",
)
