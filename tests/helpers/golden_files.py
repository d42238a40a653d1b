"""Where each vLLM release's recordings live (tests/golden/README.md), read
as one JSON document a line, gzipped or not."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

GOLDEN = Path(__file__).parents[1] / "golden"
RELEASES = {"0.33": GOLDEN, "0.34": GOLDEN / "v0.34"}
"""The compat profile each folder's render server answered as."""


def recorded(release: str, stem: str) -> list[dict]:
    """`<stem>.jsonl` (or `.jsonl.gz`) of that release; [] if not recorded."""
    folder = RELEASES[release]
    for path in (folder / f"{stem}.jsonl", folder / f"{stem}.jsonl.gz"):
        if path.exists():
            opener = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rt", encoding="utf-8") as f:
                return [json.loads(line) for line in f]
    return []
