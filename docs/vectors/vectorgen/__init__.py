"""The parts of docs/vectors/generate.py, one module per vectors file it writes.

hands.py and invalid.py make fairdeck-v1.json (valid hands, invalid transcripts); texts.py
fairdeck-v1-texts.json; log.py fairdeck-log-v1.json; witness.py fairdeck-witness-v1.json;
tiles.py fairdeck-tiles-v1.json; hand_proofs.py fairdeck-hand-proofs-v1.json. tree.py is the
small log the witness and hand-proof vectors share. Every seed and key comes from a fixed
label (hands.label_bytes), so the output is deterministic; vectors of a published version
never change (spec section 9): edit only to add vectors.
"""
