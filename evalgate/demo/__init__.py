"""Tiny loopback servers for the bundled ``live`` demo (``python -m evalgate.demo.live``).

They ship inside the package (standard library only) so the demo works from an installed package or the
container image, where the ``tests`` package is absent: ``agent.py`` answers the black-box agent
dialect's ``POST /api/agent/chat`` from a small fixed knowledge base, and ``judge.py`` is a deterministic
scripted judge that speaks the OpenAI chat-completions protocol. Neither is a model; both exist to show evalgate's
http target and judge pipeline end to end without network access or API keys.
"""
