"""Fitted copies kept: the same image under the same limits is encoded once."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pytest
from PIL import Image

from pipelines.bounded import DecodeBudget
from pipelines.fit import FitLimits, encoded_size
from pipelines.fit_cache import SUFFIX, FittedCopies
from tests.conftest import files_under
from tests.support.screens import screenshot_png

pytestmark = pytest.mark.unit
HERE = DecodeBudget(isolate=False)  # the unit tier forks nothing


def _screen(
    tmp_path: Path, width: int = 2400, height: int = 1350, seed: int = 0
) -> tuple[Path, str]:
    data = screenshot_png(width, height, seed=seed)
    path = tmp_path / f"screen-{seed}.png"
    path.write_bytes(data)
    return path, hashlib.sha256(data).hexdigest()


def _within(data: bytes, limits: FitLimits) -> None:
    assert encoded_size(len(data)) <= limits.image_budget
    with Image.open(io.BytesIO(data)) as image:
        assert max(image.size) <= limits.max_side


def test_the_same_image_and_limits_are_encoded_once(tmp_path: Path) -> None:
    copies = FittedCopies(tmp_path / "fitted", decode=HERE)
    path, sha = _screen(tmp_path)
    first = copies.fit(path, sha, "image/png", FitLimits())
    kept = files_under(copies.folder)
    again = copies.fit(path, sha, "image/png", FitLimits())
    assert copies.made == 1
    assert first is not None and again == first
    assert files_under(copies.folder) == kept and len(kept) == 1
    _within(again.data, FitLimits())
    # Another instance (another door process) finds it too.
    assert (
        FittedCopies(copies.folder, decode=HERE).fit(path, sha, "image/png", FitLimits()) == first
    )


def test_other_limits_make_another_copy_within_them(tmp_path: Path) -> None:
    copies = FittedCopies(tmp_path / "fitted", decode=HERE)
    path, sha = _screen(tmp_path)
    small = FitLimits(max_side=800, max_image_bytes=150_000)
    big = copies.fit(path, sha, "image/png", FitLimits())
    little = copies.fit(path, sha, "image/png", small)
    assert big is not None and little is not None
    assert copies.made == 2 and len(files_under(copies.folder)) == 2
    _within(little.data, small)
    assert max(little.width, little.height) <= 800 < max(big.width, big.height)


@pytest.mark.parametrize("damage", ["altered", "cut", "gone", "not json"])
def test_a_damaged_or_missing_copy_is_made_again(tmp_path: Path, damage: str) -> None:
    copies = FittedCopies(tmp_path / "fitted", decode=HERE)
    path, sha = _screen(tmp_path)
    first = copies.fit(path, sha, "image/png", FitLimits())
    assert first is not None
    (kept,) = files_under(copies.folder)
    raw = kept.read_bytes()
    match damage:
        case "altered":
            kept.write_bytes(raw[:-10] + bytes(10))
        case "cut":
            kept.write_bytes(raw[: len(raw) // 2])
        case "gone":
            kept.unlink()
        case _:
            kept.write_bytes(b"[" + raw[1:])
    again = copies.fit(path, sha, "image/png", FitLimits())
    assert copies.made == 2
    assert again == first
    assert kept.read_bytes() == raw  # written again, whole


def test_an_image_that_fits_is_not_copied(tmp_path: Path) -> None:
    copies = FittedCopies(tmp_path / "fitted", decode=HERE)
    path, sha = _screen(tmp_path, 640, 480)
    assert copies.fit(path, sha, "image/png", FitLimits()) is None
    assert files_under(tmp_path / "fitted") == []


def test_copies_stay_within_their_budget_least_recently_used_out(tmp_path: Path) -> None:
    probe = FittedCopies(tmp_path / "probe", decode=HERE)
    screens = [_screen(tmp_path, seed=seed) for seed in range(3)]
    sizes = []
    for path, sha in screens:
        probe.fit(path, sha, "image/png", FitLimits())
        sizes.append(max(f.stat().st_size for f in files_under(probe.folder)))
    copies = FittedCopies(
        tmp_path / "fitted", budget_bytes=sum(sizes[:2]) + max(sizes) // 2, decode=HERE
    )
    for path, sha in screens[:2]:
        copies.fit(path, sha, "image/png", FitLimits())
    copies.fit(*screens[0], "image/png", FitLimits())  # used again: the second is older now
    copies.fit(*screens[2], "image/png", FitLimits())
    names = {p.name for p in files_under(copies.folder)}
    assert len(names) == 2 and all(name.endswith(SUFFIX) for name in names)
    copies.fit(*screens[0], "image/png", FitLimits())  # still kept: not made again
    assert copies.made == 3
