"""Which script Chinese transcripts are written in: the setting's names, the request's
language tags (BCP 47: ``zh-Hans``, ``zh-CN`` -> Simplified; ``zh-Hant``, ``zh-TW``,
``zh-HK`` -> Traditional), and the OpenCC configuration that writes each. No engine here:
the converter itself is `pipelines.engines.chinese_script`.

whisper writes Mandarin in either script, often Traditional whatever was said; users in
mainland China and Singapore read Simplified, so that is the default.
"""

from __future__ import annotations

from pipelines.errors import ConfigError

SIMPLIFIED = "simplified"
TRADITIONAL = "traditional"
AS_IS = "as-is"
# What each script is converted with (OpenCC's own configurations).
OPENCC_CONFIGS = {
    SIMPLIFIED: "t2s",
    TRADITIONAL: "s2t",
    "traditional-tw": "s2tw",  # Taiwan's standard characters (裡, 著)
    "traditional-hk": "s2hk",  # Hong Kong's
}
SCRIPTS = (*OPENCC_CONFIGS, AS_IS)
# Language tags (lower case) that name a script; a plain "zh" takes the configured default.
_TAGS = {
    "zh-hans": SIMPLIFIED,
    "zh-cn": SIMPLIFIED,
    "zh-sg": SIMPLIFIED,
    "zh-my": SIMPLIFIED,
    "zh-hans-cn": SIMPLIFIED,
    "zh-hant": TRADITIONAL,
    "zh-tw": "traditional-tw",
    "zh-hant-tw": "traditional-tw",
    "zh-hk": "traditional-hk",
    "zh-mo": "traditional-hk",
    "zh-hant-hk": "traditional-hk",
}


def check_script(script: str) -> str:
    if script not in SCRIPTS:
        raise ConfigError(f"Chinese script {script!r} is not one of {', '.join(SCRIPTS)}")
    return script


def split_language(tag: str) -> tuple[str, str | None]:
    """(whisper's language code, the script the tag names or None) of a language tag:
    ``zh-TW`` is ("zh", "traditional-tw"), ``zh`` ("zh", None), ``en-US`` ("en", None)."""
    tag = tag.strip().lower().replace("_", "-")
    if tag in _TAGS:
        return "zh", _TAGS[tag]
    return tag.split("-", 1)[0], None


def converts(language: str) -> bool:
    """Whether a transcript in whisper's `language` is written in a chosen script: Mandarin
    ("zh"); Cantonese ("yue") is Traditional by custom and left as whisper writes it."""
    return language == "zh"
