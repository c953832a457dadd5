"""``FILE_SIZE_LIMIT``: a ``python -c`` script that runs the fairdeck command line under a file size
limit (RLIMIT_FSIZE, argv[1] bytes), so a write past it fails with EFBIG as on a full disk."""

from __future__ import annotations

FILE_SIZE_LIMIT = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
from fairdeck.cli import main
sys.exit(main(sys.argv[2:]))
"""
