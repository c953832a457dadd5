"""``python -m fairdeck.cli``: the ``fairdeck`` console script."""

import sys

from fairdeck.cli.commands import main

sys.exit(main())
