"""The synthesis request: checked field by field, one canonical form per request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.errors import PermanentError
from pipelines.speech.request import SynthesisRequest

pytestmark = pytest.mark.unit


def test_a_request_reads_back_from_its_document(tmp_path: Path) -> None:
    made = SynthesisRequest("Hello there.", "af_heart", 1.25, "mp3")
    path = tmp_path / "speech-request.json"
    path.write_bytes(made.to_bytes())
    assert SynthesisRequest.read(path) == made
    # the canonical form: key order and escapes never move a request's hash
    assert made.to_bytes() == json.dumps(made.to_json(), sort_keys=True).encode()
    accented = SynthesisRequest("Café.", None, 1.0, "ogg")
    assert "Café".encode() in accented.to_bytes()  # not escaped: readable in the cache
    assert SynthesisRequest.from_json({"text": "Hi."}, default_speed=0.9).speed == 0.9


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"format": "ogg"}, "needs `text`"),
        ({"text": "Hi.", "format": "docx"}, "needs `text` and a format"),
        ({"text": "Hi.", "speed": 9}, "outside 0.2-4.0"),
        ({"text": "Hi.", "speed": 0.1}, "outside 0.2-4.0"),
        ({"text": "Hi.", "speed": True}, "not a number"),
        ({"text": "Hi.", "speed": "fast"}, "not a number"),
        ({"text": "Hi.", "voice": ["a", "b"]}, "not a voice name"),
    ],
)
def test_a_bad_request_is_refused_naming_the_field(data: dict[str, object], message: str) -> None:
    with pytest.raises(PermanentError, match=message):
        SynthesisRequest.from_json(data)


def test_a_document_that_is_not_a_request_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "gone.json"
    with pytest.raises(PermanentError, match="cannot read the synthesis request"):
        SynthesisRequest.read(missing)
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    with pytest.raises(PermanentError, match="is not a synthesis request"):
        SynthesisRequest.read(listed)
