from __future__ import annotations

import base64
import hashlib
import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import pipelines.base64_stream as base64_stream
from pipelines.base64_stream import decoded_size_bound, iter_base64
from pipelines.cache import CacheLimits, MediaCache
from pipelines.media import BlobError, MarkerReason, MediaKind
from pipelines.sniff import ImageCheckError, verify_image
from tests.conftest import files_under
from tests.support.factories import jpeg_bytes, png_bytes

pytestmark = pytest.mark.unit

PDF = b"%PDF-1.4\n" + bytes(range(256)) * 40 + b"\n%%EOF\n"


def decode_all(text: str, chunk_chars: int = 8) -> bytes:
    return b"".join(iter_base64(text, chunk_chars=chunk_chars))


@pytest.mark.parametrize("chunk", [4, 5, 7, 8, 1024])
def test_streamed_decode_matches_stdlib_for_any_chunking(chunk: int) -> None:
    data = os.urandom(1000)
    assert decode_all(base64.b64encode(data).decode(), chunk) == data


def _outcome(text: str, chunk: int) -> bytes | MarkerReason:
    try:
        return decode_all(text, chunk)
    except BlobError as exc:
        return exc.reason


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet="ABCDxyz0189+/-_=\n \t", max_size=80),
    chunk=st.sampled_from([4, 8, 12, 16]),
)
def test_fast_chunks_decide_exactly_as_the_general_path(text: str, chunk: int) -> None:
    # A chunk size that is not a multiple of 4 turns the fast path off: both must agree.
    assert _outcome(text, chunk) == _outcome(text, chunk - 1)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=120), cuts=st.lists(st.integers(0, 200), max_size=4))
def test_any_mix_of_plain_and_wrapped_chunks_round_trips(data: bytes, cuts: list[int]) -> None:
    text = base64.b64encode(data).decode()
    for cut in sorted(cuts, reverse=True):  # line breaks here and there: mixed chunk kinds
        text = text[:cut] + "\n" + text[cut:]
    assert decode_all(text, 8) == data


def test_decode_accepts_urlsafe_line_breaks_and_missing_padding() -> None:
    data = os.urandom(301)
    urlsafe = base64.urlsafe_b64encode(data).decode().rstrip("=")
    wrapped = "\r\n".join(urlsafe[i : i + 76] for i in range(0, len(urlsafe), 76))
    assert decode_all(wrapped) == data
    assert decode_all(base64.encodebytes(data).decode()) == data
    assert decode_all("QUJDRA=") == b"ABCD"


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("QUJD!!==", "illegal"),
        ("QUJD=", "bad padding"),
        ("QUJDRA===", "bad padding"),
        ("QUJDRA==QUJD", "after the padding"),
        ("QUJDR", "truncated"),
        ("QUJD\u00e9QUJD", "non-ASCII"),
    ],
)
def test_bad_base64_is_refused_with_a_reason(text: str, detail: str) -> None:
    with pytest.raises(BlobError) as info:
        decode_all(text, chunk_chars=4)
    assert info.value.reason is MarkerReason.BAD_BASE64
    assert "could not be decoded" in info.value.message
    assert detail.lower() in info.value.message.lower()


def test_bad_base64_leaves_no_file(cache: MediaCache) -> None:
    good = base64.b64encode(PDF).decode()
    with pytest.raises(BlobError):
        cache.store_base64(good[:400] + "*" + good[400:], MediaKind.DOCUMENT, uri="x/a.pdf")
    assert files_under(cache.root) == []


def test_pdf_round_trips_byte_for_byte_with_its_name(cache: MediaCache) -> None:
    stored = cache.store_base64(
        base64.b64encode(PDF).decode(),
        MediaKind.DOCUMENT,
        mime="application/pdf",
        uri="slack://files/F123/quarterly-report.pdf",
    )
    assert stored.path.name == "quarterly-report.pdf"
    assert stored.path.parent == cache.root / "documents" / hashlib.sha256(PDF).hexdigest()[:16]
    assert stored.path.read_bytes() == PDF
    assert stored.sha256 == hashlib.sha256(PDF).hexdigest()
    assert stored.size == len(PDF)


def test_documents_are_found_by_their_hash_and_only_by_it(cache: MediaCache) -> None:
    stored = cache.store_bytes(PDF, MediaKind.DOCUMENT, mime="application/pdf", name="q3.pdf")
    assert cache.find(stored.sha256) is None  # images and audio only
    found = cache.find_document(stored.sha256)
    assert found is not None and found.path == stored.path and found.size == len(PDF)
    # Another file under the same prefix folder (another name, other bytes) is not it.
    (stored.path.parent / "a-first.pdf").write_bytes(b"%PDF-1.4 other")
    again = cache.find_document(stored.sha256)
    assert again is not None and again.path == stored.path
    assert cache.find_document(stored.sha256[:16] + "0" * 48) is None
    assert cache.find_document("../" + stored.sha256[3:]) is None


def test_permissions_are_private(cache: MediaCache) -> None:
    stored = cache.store_bytes(png_bytes(), MediaKind.IMAGE)
    assert stat.S_IMODE(stored.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(stored.path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(cache.root.stat().st_mode) == 0o700


def test_identical_bytes_give_one_file(cache: MediaCache) -> None:
    data = base64.b64encode(png_bytes()).decode()
    first = cache.store_base64(data, MediaKind.IMAGE, mime="image/png")
    second = cache.store_base64(data, MediaKind.IMAGE, mime="image/jpeg")
    assert first.path == second.path
    assert first.path.name == f"{first.sha256}.png"
    assert len(files_under(cache.root)) == 1


def test_oversized_base64_is_refused_before_any_decoding(
    cache: MediaCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = base64_stream._decode_chunk

    def counting(chunk: bytes) -> bytes:
        calls.append(len(chunk))
        return real(chunk)

    monkeypatch.setattr(base64_stream, "_decode_chunk", counting)
    huge = "A" * (2 * 1024 * 1024)  # 1.5 MiB decoded, limit is 1 MiB
    with pytest.raises(BlobError) as info:
        cache.store_base64(huge, MediaKind.DOCUMENT, uri="a.bin")
    assert info.value.reason is MarkerReason.TOO_LARGE
    assert "limit 1048576 bytes" in info.value.message
    assert calls == []
    # The spy is wired in: a small blob does go through it.
    cache.store_base64("QUJD", MediaKind.DOCUMENT, uri="b.bin")
    assert calls == [4]


def test_decoded_size_is_checked_again_while_streaming(tmp_path: Path) -> None:
    # The pre-check bound is exact for valid base64, so drive the streaming writer with
    # chunks directly: it must stop at the limit by itself and leave nothing behind.
    cache = MediaCache(tmp_path / "c", CacheLimits(max_blob_bytes=2999))
    assert decoded_size_bound(base64.b64encode(os.urandom(3000)).decode()) == 3000
    chunks = iter([b"x" * 2000, b"x" * 2000, b"never reached"])
    with pytest.raises(BlobError) as info:
        cache._store_chunks(
            chunks, MediaKind.DOCUMENT, mime=None, uri="a.bin", name=None, validate=None
        )
    assert info.value.reason is MarkerReason.TOO_LARGE
    assert "after decoding" in info.value.message
    assert next(chunks) == b"never reached"
    assert files_under(tmp_path / "c") == []


def test_whitespace_padding_does_not_fool_the_size_bound() -> None:
    text = "\n".join(["QUJD"] * 10)
    assert decoded_size_bound(text) == 30


def test_audio_extension_comes_from_the_container(cache: MediaCache) -> None:
    from tests.support.factories import mp3_like_bytes, ogg_like_bytes, wav_bytes

    for data, claimed, ext in [
        (wav_bytes(), "audio/mpeg", ".wav"),
        (ogg_like_bytes(), "audio/ogg", ".ogg"),
        (mp3_like_bytes(), "audio/wav", ".mp3"),
    ]:
        stored = cache.store_bytes(data, MediaKind.AUDIO, mime=claimed)
        assert stored.path.suffix == ext


def test_not_audio_is_refused(cache: MediaCache) -> None:
    with pytest.raises(BlobError) as info:
        cache.store_bytes(b"<html>500</html>", MediaKind.AUDIO, mime="audio/ogg")
    assert info.value.reason is MarkerReason.NOT_AUDIO
    assert files_under(cache.root) == []


def test_planted_symlink_is_replaced_not_followed(cache: MediaCache, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    data = png_bytes()
    digest = hashlib.sha256(data).hexdigest()
    folder = cache.root / "images"
    folder.mkdir(parents=True)
    (folder / f"{digest}.png").symlink_to(outside)
    stored = cache.store_bytes(data, MediaKind.IMAGE)
    assert not stored.path.is_symlink()
    assert stored.path.read_bytes() == data
    assert outside.read_text() == "secret"


def test_symlinked_folder_is_refused(cache: MediaCache, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cache.root.mkdir(parents=True)
    (cache.root / "documents").symlink_to(elsewhere)
    with pytest.raises(BlobError) as info:
        cache.store_bytes(PDF, MediaKind.DOCUMENT, uri="a.pdf")
    assert info.value.reason is MarkerReason.CACHE_ERROR
    assert list(elsewhere.iterdir()) == []


def test_write_failure_leaves_no_partial_file(cache: MediaCache) -> None:
    def chunks_then_fail() -> Iterator[bytes]:
        yield b"x" * 1000
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        cache._store_chunks(
            chunks_then_fail(), MediaKind.DOCUMENT, mime=None, uri="a", name=None, validate=None
        )
    assert [p for p in files_under(cache.root)] == []


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b"<!DOCTYPE html><html><body>Not Found</body></html>", "markup"),
        (b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>', "markup"),
    ],
)
def test_markup_labelled_as_png_is_not_an_image(
    tmp_path: Path, payload: bytes, expected: str
) -> None:
    path = tmp_path / "x"
    path.write_bytes(payload)
    with pytest.raises(ImageCheckError, match=expected):
        verify_image(path, payload[:64])


def test_truncated_jpeg_is_not_an_image(tmp_path: Path) -> None:
    data = jpeg_bytes((256, 256))
    path = tmp_path / "t.jpg"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ImageCheckError, match="truncated"):
        verify_image(path, data[:64])


def test_decompression_bomb_is_refused(tmp_path: Path) -> None:
    out = io.BytesIO()
    Image.new("1", (10_000, 10_000)).save(out, format="PNG")
    path = tmp_path / "bomb.png"
    path.write_bytes(out.getvalue())
    assert path.stat().st_size < 100_000
    with pytest.raises(ImageCheckError, match="decompression bomb"):
        verify_image(path, out.getvalue()[:64])
