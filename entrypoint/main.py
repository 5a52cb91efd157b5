"""Container entrypoint: ``python -m entrypoint.main [ARGS]``.

Inside GitHub Actions (``GITHUB_ACTIONS=true``) it runs the Action: inputs from ``INPUT_*``, the event
payload, evaluation, then publishing (see :mod:`evalgate.cli.action`). Anywhere else it is exactly
``evalgate run`` with ``ARGS`` passed through, so ``docker run --rm -v "$PWD:/work" -w /work evalgate``
runs the bundled demo suites, ``… evalgate --first-n 3`` is ``evalgate run --first-n 3`` and
``… evalgate validate -d cases.yaml`` is ``evalgate validate -d cases.yaml``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

PASSTHROUGH_FLAGS = ("-h", "--help", "--version")


def cli_argv(argv: Sequence[str], verbs: Sequence[str]) -> list[str]:
    """Arguments for ``evalgate``: a verb is kept, anything else is taken as ``run``'s flags."""
    args = list(argv)
    if not args or args[0] in verbs or args[0] in PASSTHROUGH_FLAGS:
        return args
    return ["run", *args]


def known_verbs() -> list[str]:
    """Verbs of the ``evalgate`` command line (run, eval, validate and any contributed ones)."""
    import argparse

    from evalgate.cli.main import build_parser

    parser = build_parser()
    for action in parser._actions:  # argparse keeps sub-parsers only here
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Dispatch on ``GITHUB_ACTIONS``; returns the exit status (0 pass, 1 gate failed, 2 user error, 130
    interrupted; see ``evalgate.errors``)."""
    env = os.environ if env is None else env
    args = list(sys.argv[1:] if argv is None else argv)
    if env.get("GITHUB_ACTIONS") == "true":
        from evalgate.cli.action import run_action

        return run_action(env, args)
    from evalgate.cli.main import main as cli_main

    return cli_main(cli_argv(args, known_verbs()))


if __name__ == "__main__":
    sys.exit(main())
