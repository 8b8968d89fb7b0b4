"""Simplified <-> Traditional Chinese with OpenCC (BYVoid's converter, Apache-2.0): phrase
tables first, then characters, so 头发 becomes 頭髮 and 天氣 becomes 天气."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from pipelines.errors import ConfigError
from pipelines.speech.chinese_script import AS_IS, OPENCC_CONFIGS, check_script


@cache
def script_converter(script: str) -> Callable[[str], str] | None:
    """A function writing text in `script` (None for as-is), loaded once per process."""
    if check_script(script) == AS_IS:
        return None
    try:
        import opencc
    except ImportError:
        raise ConfigError(
            "Chinese transcripts are converted with OpenCC: install mcp-media[speech]"
            " (the opencc package), or set MCP_MEDIA_STT__CHINESE_SCRIPT=as-is"
        ) from None
    convert: Callable[[str], str] = opencc.OpenCC(OPENCC_CONFIGS[script]).convert
    return convert
