"""The load-and-select stage of a run: the cases it scores, read from the files ``dataset`` names (the bundled
demo suites when it names none) and chosen by the selection settings (``load_selected`` → ``dataset.stream.Scan``);
a run whose cases have nothing to score stops before it starts (``check_answers_recorded``)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from evalgate.config.sections import SelectionSettings
from evalgate.config.suite import SuiteConfig
from evalgate.dataset.stream import Scan, scan, selector
from evalgate.errors import DOCS_SITE, UserError
from evalgate.model import Case

DEMO_EXCLUDED = {"failing", "live"}


def demo_dir() -> Path:
    """Where the bundled demo suites live: inside the installed package (``evalgate/demo/datasets``,
    copied there by the wheel build), else ``datasets/`` beside the package (a checkout, an editable
    install, the container image)."""
    package = Path(__file__).resolve().parents[1]
    installed = package / "demo" / "datasets"
    return installed if installed.is_dir() else package.parent / "datasets"


def default_datasets() -> list[str]:
    """The passing demo suites: every sub-directory of ``datasets/`` except failing/ and live/."""
    root = demo_dir()
    if not root.is_dir():
        raise UserError("no --dataset given and no bundled demo suites found", where="dataset")
    return [str(p) for p in sorted(root.iterdir()) if p.is_dir() and p.name not in DEMO_EXCLUDED]


def load_selected(selection: SelectionSettings, base: SuiteConfig, cwd: Path) -> Scan:
    """Every case of the ``dataset`` files validated once, and those the selection keeps (``case_ids``,
    ``first_n``, ``category``, ``tags``, ``shard``: ``dataset.select``), streamed (``dataset.stream.scan``).
    ``base``: evalgate.yaml's suite-level keys."""
    choose = selector(case_ids=selection.case_ids or None, first_n=selection.first_n,
                      categories=selection.category or None, tags=selection.tags or None,
                      shard=selection.shard_tuple)
    return scan(selection.dataset or default_datasets(), cwd, select=choose, base=base)


def check_answers_recorded(selection: SelectionSettings, cases: Iterable[Case]) -> None:
    """With the default target (``recorded``, no ``outputs_file``), answers come from the cases' own ``output:``.
    A dataset none of whose cases has one (the README's example, a new suite) would only error every case:
    exit 2 instead, saying how to add answers. Stops at the first case with an answer (usually the first)."""
    if selection.target != "recorded" or selection.outputs_file:
        return
    first = None
    for case in cases:
        if case.output is not None or case.turns is not None or case.simulated_user is not None:
            return
        first = first or case
    if first is None:
        return
    raise UserError("no case has an answer to score: the default target 'recorded' reads each case's output: "
                    "field. Record answers there (output: ...), give an outputs_file (answers keyed by case id), "
                    f"or let your agent answer: target: http and target_url: in evalgate.yaml ({DOCS_SITE}targets/)",
                    where=first.location or "dataset")
