"""Exports of a finished run to other systems (Langfuse)."""
