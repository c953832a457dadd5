"""The JavaScript seat's release token (client/web/src/codeal/seat.js ``sealRelease``) against the
Python reference on every case of docs/vectors/fairdeck-codeal-release-v1.json (docs/codealing-spec.md
9.3), on Node: the same token for a seal that opens, the same refusal for a wrong seat key, position,
hand, holder or deck. A whole draw's releases, and the page's seat: test_codeal_page_release.py."""

from __future__ import annotations

import json
import subprocess

from tests.support import browser

RELEASE_FILE = browser.VECTORS / "fairdeck-codeal-release-v1.json"


def test_node_gives_the_reference_release_line_on_every_vector() -> None:
    browser.require(browser.node_missing())
    done = subprocess.run(
        ["node", "test/release-lines.mjs", str(RELEASE_FILE)],
        cwd=browser.WEB,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    vectors = json.loads(RELEASE_FILE.read_text())
    assert json.loads(done.stdout) == {c["name"]: c["line"] for c in vectors["cases"]}
