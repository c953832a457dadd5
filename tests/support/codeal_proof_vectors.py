"""The co-dealt hand proofs of docs/vectors/fairdeck-codeal-proofs-v1.json (``PROOFS``), valid
and invalid together as ``CASES``: read by `fairdeck verify` and by the player's page alike."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "docs" / "vectors"
PROOFS = json.loads((VECTORS / "fairdeck-codeal-proofs-v1.json").read_text(encoding="utf-8"))
CASES = [*PROOFS["valid"], *PROOFS["invalid"]]
