"""The co-dealt hand proofs of docs/vectors/fairdeck-codeal-proofs-v1.json (``PROOFS``), valid
and invalid together as ``CASES``, and format 5's v2 file (``PROOFS_V2``, ``CASES_V2``): read by
`fairdeck verify` and by the player's page alike."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "docs" / "vectors"
PROOFS = json.loads((VECTORS / "fairdeck-codeal-proofs-v1.json").read_text(encoding="utf-8"))
CASES = [*PROOFS["valid"], *PROOFS["invalid"]]

PROOFS_V2 = json.loads((VECTORS / "fairdeck-codeal-proofs-v2.json").read_text(encoding="utf-8"))
"""Format 5's vectors (docs/vectors/fairdeck-codeal-proofs-v2.json): receipts and seal statements."""
CASES_V2 = [*PROOFS_V2["valid"], *PROOFS_V2["invalid"]]
