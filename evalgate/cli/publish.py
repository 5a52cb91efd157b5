"""``evalgate publish``: post a finished pull_request run's results from an ``on: workflow_run`` workflow
(fork pull requests; see :mod:`evalgate.github.relay` and docs/fork-pull-requests.md)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any


def add_publish(verbs: Any) -> None:
    text = ("in an `on: workflow_run` workflow: download the evaluated pull_request run's results artifact and "
            "post or update its PR comment (never runs the pull request's code)")
    parser = verbs.add_parser("publish", help=text, description=text[0].upper() + text[1:] + ".",
                              epilog="Reads GITHUB_EVENT_PATH, GITHUB_REPOSITORY, GITHUB_API_URL and GITHUB_TOKEN. "
                                     "Exit status: 0 published, 1 could not publish (one ::error line), "
                                     "2 configuration error.")
    parser.add_argument("--run-id", type=int, metavar="N",
                        help="the evaluated run (default: workflow_run.id of the event)")
    parser.add_argument("--artifact-name", default="", metavar="NAME",
                        help="the results artifact (default evalgate-results, plus -TAG for a comment tag)")
    parser.add_argument("--comment-tag", default="default", metavar="TAG",
                        help="the tag the evaluating step used (default: default)")
    parser.add_argument("--output-dir", "-o", default="evalgate-results", metavar="DIR",
                        help="where the downloaded results.json and results.db go (default evalgate-results)")
    parser.set_defaults(func=cmd_publish)


def cmd_publish(args: argparse.Namespace) -> int:
    from evalgate.github.masking import env_secrets, mask_all  # lazy: the GitHub client, not for --help
    from evalgate.github.publish import options_from_inputs  # lazy: the GitHub client, not for --help
    from evalgate.github.relay import relay  # lazy: the GitHub client, not for --help

    env = dict(os.environ)
    token = env.get("INPUT_GITHUB-TOKEN") or env.get("GITHUB_TOKEN") or ""
    mask_all([*env_secrets(env), token], lambda line: print(line, flush=True))
    options = options_from_inputs({"comment-tag": args.comment_tag, "artifact-name": args.artifact_name,
                                   "github-token": token, "upload-artifacts": "false"}, cwd=Path.cwd())
    return relay(env=env, options=options, output_dir=Path(args.output_dir), run_id=args.run_id,
                 emit=lambda line: print(line, flush=True))
