"""Peer tools (promptfoo, DeepEval): scratch installs and the DeepEval runner script."""
