"""``python -m evalgate``: the ``evalgate`` command line (the same exit path as the console script)."""

from evalgate.cli.main import console_main

console_main()
