"""A client process for integration tests: submit one image N times at once, wait, report.

    python -m tests.support.submitter IMAGE COUNT WAIT_SECONDS

Prints a JSON list of {"id", "status", "summary"}, one per submission.
"""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pipelines.ingest import validate_image
from pipelines.media import Capability, MediaKind
from workers.gateways.cluster import MediaClient


def main(argv: list[str]) -> int:
    image, count, wait = Path(argv[0]), int(argv[1]), float(argv[2])
    client = MediaClient.connect()
    stored = client.settings.media_cache().store_file(
        image, MediaKind.IMAGE, validate=validate_image
    )

    def one(_: int) -> dict[str, Any]:
        handle = client.submit_one(Capability.VISION_SUMMARIZE, stored.sha256, stored.path)
        (done,) = client.wait([handle], wait)
        summary = done.envelope.output.get("summary") if done.envelope else None
        return {"id": done.id, "status": done.status.value, "summary": summary}

    try:
        with ThreadPoolExecutor(max_workers=count) as pool:
            rows = list(pool.map(one, range(count)))
    finally:
        client.close()
    json.dump(rows, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
