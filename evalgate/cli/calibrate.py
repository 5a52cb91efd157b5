"""``evalgate calibrate``: score the suites' human-labelled examples with the configured judge, print the
agreement per metric (accuracy, Cohen's κ, Spearman, Kendall with intervals, the confusion matrix and the worst
disagreements) and store it (results database + committable JSON file). Exit 0 when every calibrated metric
meets its floor, 1 when one does not, 2 on a configuration or labels error."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping
from typing import Any

from evalgate.cli.options import add_run_options, add_selection, cli_values, guard_secret_destinations, print_notices
from evalgate.report.escape import one_line, strip_controls


def add_calibrate(verbs: Any) -> None:
    text = "measure the judge's agreement with human labels (Cohen's κ) so that it may gate"
    parser = verbs.add_parser("calibrate", help=text, description=text[0].upper() + text[1:] + ".",
                              epilog="Exit status: 0 every metric meets its calibration floor, 1 one does not, "
                                     "2 configuration or labels error.")
    add_selection(parser)
    add_run_options(parser)
    parser.add_argument("--metric", action="append", metavar="NAME", dest="calibrate_metrics",
                        help="calibrate only this judged metric (repeatable; default: every labelled one)")
    parser.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from evalgate.config.settings import build_settings  # lazy: the run stack (pydantic, httpx), not for --help
    from evalgate.runner.calibrate import calibrate  # lazy: the run stack (pydantic, httpx), not for --help

    metrics = getattr(args, "calibrate_metrics", None)
    args.calibrate_metrics = None
    values, origins, notices = cli_values(args)
    values.pop("calibrate_metrics", None)
    settings, suite_config, _ = build_settings(cli=values, cli_origins=origins)
    guard_secret_destinations(settings)
    print_notices(notices + settings.notices)
    outcome = asyncio.run(calibrate(settings, suite_config, metrics=metrics))
    print_notices(outcome.notices)
    if settings.format == "json":
        print(json.dumps({"calibrations": outcome.records, "standing": {k: {"status": s, "reason": r} for k, (s, r)
                                                                         in outcome.standings.items()}},
                         indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(render_text(outcome.records, outcome.standings))
        for path in outcome.files:
            print(f"Calibration file: {path}  ·  SQLite: {outcome.db_path}")
    below = [name for name, (state, _) in outcome.standings.items() if state != "calibrated"]
    for name in below:
        print(f"evalgate: calibration: {name}: {outcome.standings[name][1]} — its verdicts will not gate",
              file=sys.stderr)
    return 1 if below else 0


def render_text(records: list[dict[str, Any]], standings: Mapping[str, tuple[str, str]]) -> str:
    def plain(text: str) -> str:
        return one_line(strip_controls(text))

    lines: list[str] = []
    for record in records:
        state, why = standings[record["metric"]]
        mark = "✓" if state == "calibrated" else "✗"
        lines.append(f"{mark} {record['metric']}  judge {record['judge']}  {why}")
        lines.append(f"    accuracy {_num(record.get('accuracy'))} {_ci(record.get('accuracy_ci'))}  "
                     f"κ {_num(record.get('kappa'))} {_ci(record.get('kappa_ci'))}  "
                     f"Spearman {_num(record.get('spearman'))} {_ci(record.get('spearman_ci'))}  "
                     f"Kendall {_num(record.get('kendall'))} {_ci(record.get('kendall_ci'))}")
        c = record["confusion"]
        if "pass_pass" in c:
            lines.append(f"    labels pass: judge pass {c['pass_pass']}, fail {c['pass_fail']}  ·  labels fail: judge "
                         f"pass {c['fail_pass']}, fail {c['fail_fail']}  ·  no verdict {record.get('unavailable', 0)}")
        else:  # pairwise: label_verdict counts over A / B / tie
            lines.append("    label → judge: " + ", ".join(f"{k.replace('_', ' → ')} {v}" for k, v in c.items()))
        for row in record.get("disagreements", []):
            value = f" ({_num(row['judge_value'])})" if row.get("judge_value") is not None else ""
            where = f" ({row['source']})" if row.get("source") else ""
            lines.append(f"    ✗ {plain(row['example'])}{where}: label {row['label']}, judge {row['verdict']}{value}: "
                         f"{plain(row['reasoning'])[:160]}")
    return "\n".join(lines) + "\n"


def _num(value: Any) -> str:
    return "—" if value is None else f"{value:.2f}"


def _ci(interval: Any) -> str:
    return "" if not interval else f"[{interval[0]:.2f}, {interval[1]:.2f}]"
