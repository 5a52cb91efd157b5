"""Conversation cases (``turns:``) shared by the CLI's and the Action's tests."""

from __future__ import annotations

NAME_CONVERSATION = """\
- id: remembers-name
  evolution_type: multi_turn
  turns:
    - user: Hello, my name is Ana.
      tools_should_include: [remember]
    - user: I like chess.
    - user: What is my name?
      expected_keywords: [Ana]
      tools_should_include: [recall]
    - user: Thanks!
  expected_keywords: [Ana]
- id: single-turn
  input: What is my name?
  expected_keywords: [know]
"""
