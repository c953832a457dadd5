"""``python -m fairdeck.cli``: the ``fairdeck`` console script."""

import sys

from fairdeck.cli.dispatch import main

sys.exit(main())
