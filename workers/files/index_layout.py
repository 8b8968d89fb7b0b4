"""Where a bucket keeps its index: small marker objects, one per stored blob and one per
result that is not done, each named so that a listing (about 1,000 keys a request, in key
order) gives them in sha256 order with what a plan needs.

  index/inputs/<kind>/<sha256>.<size>.<stored><ext>  one per input blob, written after it
  index/outputs/<sha256>                              one per blob we produced (a reply)
  index/unsettled/<capability>/<version>/<sha256>     a result of that key, degraded or failed
  index/marks/inputs                                  the blobs stored before were indexed
  index/marks/unsettled/<capability>/<version>        that version's results were read once

The blobs (`blobs/sha256/<aa>/<sha256>`) and sidecars (`results/...`) stay where they are:
a store written before the index keeps working, and one backfill indexes what it holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.errors import PermanentError
from pipelines.media import Capability, MediaKind
from workers.core.blob_ref import BlobRef

INDEX = "index/"
OUTPUTS = f"{INDEX}outputs/"
INPUTS_MARK = f"{INDEX}marks/inputs"
# Sorts after every name that starts with a sha256 ('~' follows '.' and every hex digit):
# the listing of a prefix resumed "after" a sha256 skips that sha256's own names.
AFTER = "~"


@dataclass(frozen=True, slots=True)
class Indexed:
    """One input blob as an index lists it: its size and when it was stored are known to a
    bucket's marker, and looked up on disk for a local cache only when it is chosen."""

    sha256: str
    ext: str
    size: int | None = None
    stored: float | None = None


def inputs_prefix(kind: MediaKind) -> str:
    return f"{INDEX}inputs/{kind.value}/"


def input_marker(ref: BlobRef, stored: float) -> str:
    return f"{inputs_prefix(ref.kind)}{ref.sha256}.{ref.size}.{int(stored)}{ref.ext}"


def parse_input(name: str) -> Indexed | None:
    """The blob a marker's name (below its kind's prefix) stands for; None for a name that
    is not one."""
    sha256, rest = name[:64], name[64:]
    size, dot, tail = rest[1:].partition(".")
    stored, dot2, ext = tail.partition(".")
    if not rest.startswith(".") or not dot or not size.isdigit() or not stored.isdigit():
        return None
    try:
        ref = BlobRef(sha256, MediaKind.IMAGE, f".{ext}" if dot2 else "", int(size))
    except PermanentError:
        return None
    return Indexed(ref.sha256, ref.ext, ref.size, float(stored))


def output_marker(sha256: str) -> str:
    return f"{OUTPUTS}{sha256}"


def results_prefix(capability: Capability, version: str) -> str:
    """Where the sidecars of one (capability, version) are: `<sha256>.json` below it."""
    return f"results/{capability.value}/{version}/"


def unsettled_prefix(capability: Capability, version: str) -> str:
    return f"{INDEX}unsettled/{capability.value}/{version}/"


def unsettled_mark(capability: Capability, version: str) -> str:
    return f"{INDEX}marks/unsettled/{capability.value}/{version}"
