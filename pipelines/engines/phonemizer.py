"""espeak-ng phonemes from `piper-phonemize` (GPL-3: the optional `phonemes` extra).

The only module that imports `piper_phonemize`. It is imported when a phonemizer is built,
so the rest of the project installs and imports without it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from pipelines.errors import ConfigError


def _load_module() -> ModuleType:
    try:
        return importlib.import_module("piper_phonemize")
    except ImportError as exc:
        raise ConfigError(
            "piper voices need espeak-ng phonemes: install the 'phonemes' extra"
            " (piper-phonemize, GPL-3)"
        ) from exc


class EspeakPhonemizer:
    """`Phonemizer`: text -> one IPA phoneme string per clause espeak finds in it."""

    def __init__(self, voice: str = "en-us") -> None:
        self._module = _load_module()
        self.voice = voice
        try:
            self._module.phonemize_espeak("test", voice)
        except RuntimeError as exc:
            raise ConfigError(f"espeak-ng has no voice {voice!r}: {exc}") from exc

    def phonemize(self, text: str) -> list[str]:
        clauses = self._module.phonemize_espeak(text, self.voice)
        return ["".join(clause) for clause in clauses if clause]
