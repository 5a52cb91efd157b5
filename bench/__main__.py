"""``python -m bench``: run the benchmark harness (see bench/README.md)."""

import sys

from bench.run import main

sys.exit(main())
