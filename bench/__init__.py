"""Benchmark harness: evalgate side by side with promptfoo and DeepEval on loopback servers.

Run ``python -m bench`` from the repository root (see bench/README.md). Peer tools are installed by the
harness into ``bench/scratch/`` and never become project dependencies.
"""
