"""``python -m evalgate``: the ``evalgate`` command line."""

import sys

from evalgate.cli.main import main

sys.exit(main())
