"""The pieces a reply is spoken in: the first sentence's opening clause or first few words
alone (a fast first audio), the rest by sentences, nothing dropped or moved."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipelines.speech.chunks import Chunk, plan, split_head
from pipelines.speech.text import prepare
from pipelines.speech.text_zh import prepare_zh
from workers.core.settings import Settings, TtsSettings
from workers.core.stage_configs import KOKORO_REVISION, _kokoro_part, tts_config, tts_version

pytestmark = pytest.mark.unit

REPORT = "The quarterly report shows that sales grew by twelve percent in the north."


def test_a_long_first_sentence_opens_with_its_first_words() -> None:
    assert split_head(REPORT, 4) == ("The quarterly report shows", REPORT[26:])
    assert split_head(REPORT, 6) == ("The quarterly report shows that sales", REPORT[37:])


def test_a_clause_mark_within_the_first_words_ends_the_first_piece() -> None:
    sentence = "Good news, sales grew by twelve percent in the north this quarter."
    assert split_head(sentence, 4) == ("Good news,", " sales grew by twelve percent in the"
                                       " north this quarter.")  # fmt: skip
    # a single word before the mark is too short a piece: the words rule applies
    assert split_head("Well, the report shows that sales grew a lot.", 4)[0] == (
        "Well, the report shows"
    )
    assert split_head("First; second and third words follow here.", 4)[0] == (
        "First; second and third"
    )
    assert split_head("As we said: the report shows it all today.", 4)[0] == "As we said:"


def test_short_sentences_stay_whole() -> None:
    assert split_head("First sentence here.", 4) == ("First sentence here.", "")
    # four words and a tail of two: not worth a second model run
    assert split_head("The report shows that sales grew.", 4) == (
        "The report shows that sales grew.",
        "",
    )
    assert split_head(REPORT, 0) == (REPORT, "")


def test_chinese_is_cut_at_chinese_punctuation() -> None:
    sentence = "这家餐厅的饺子很好吃，价格也不贵，服务也很周到。"
    assert split_head(sentence, 4, chinese=True) == ("这家餐厅的饺子很好吃，", sentence[11:])
    assert split_head("今天、明天和后天我们都在办公室工作。", 4, chinese=True)[0] == "今天、"
    # no mark within 3 x 4 characters: not cut (a count of characters splits 星期五)
    long = "请把季度报告在星期五之前发给财务部。"
    assert split_head(long, 4, chinese=True) == (long, "")
    mixed = "请打开Settings页面然后点击保存按钮。"
    assert split_head(mixed, 4, chinese=True) == (mixed, "")
    assert split_head("明天下午三点开会。", 4, chinese=True) == ("明天下午三点开会。", "")


def test_the_plan_cuts_only_the_first_sentence() -> None:
    sentences = prepare(f"{REPORT} Most of the growth came from new customers this spring.")
    chunks = plan(sentences, 4)
    assert chunks == [
        Chunk("The quarterly report shows", 0),
        Chunk("that sales grew by twelve percent in the north.", 0, opens=False),
        Chunk("Most of the growth came from new customers this spring.", 1),
    ]
    assert plan(sentences, 0) == [Chunk(s, i) for i, s in enumerate(sentences)]
    zh = prepare_zh("这家餐厅的饺子很好吃，价格也不贵。明天见！")
    assert [c.text for c in plan(zh, 4, chinese=True)] == [
        "这家餐厅的饺子很好吃，",
        "价格也不贵。",
        "明天见！",
    ]


def test_a_first_piece_setting_is_part_of_the_tts_version(tmp_path: Path) -> None:
    """Set, it changes every voice's output, so results made without it are not reused;
    unset (each engine's own), existing keys stay."""
    unset = Settings(home=tmp_path)
    assert unset.tts.first_chunk_words is None
    assert tts_config(unset).first_chunk_words is None
    five = Settings(home=tmp_path, tts=TtsSettings(first_chunk_words=5))
    assert tts_config(five).first_chunk_words == 5
    whole = Settings(home=tmp_path, tts=TtsSettings(first_chunk_words=0))
    versions = {tts_version(unset), tts_version(five), tts_version(whole)}
    assert len(versions) == 3


def test_kokoro_folders_move_to_the_engines_revision_other_voices_stay(tmp_path: Path) -> None:
    """Our Kokoro's output changed (style row, Chinese first piece): its cached audio is not
    reused; a piper folder's key gains nothing."""
    config = tts_config(Settings(home=tmp_path))
    config.model_dir.mkdir(parents=True)
    assert _kokoro_part(config) == []
    (config.model_dir / "voices.bin").write_bytes(b"")
    assert _kokoro_part(config) == [f"kokoro-{KOKORO_REVISION}"]


_WORD = st.text(alphabet=st.sampled_from("abcdefgh,.;:-'"), min_size=1, max_size=8)
_HAN = st.text(alphabet=st.sampled_from("我们今天天气很好，、；：。Ab1 "), min_size=1, max_size=60)


@given(st.lists(_WORD, min_size=1, max_size=30), st.integers(0, 8), st.sampled_from(" \t"))
def test_pieces_concatenate_back_and_are_never_empty(
    words: list[str], limit: int, space: str
) -> None:
    sentence = space.join(words)
    head, tail = split_head(sentence, limit)
    assert head + tail == sentence
    if tail:
        assert any(c.isalnum() for c in head) and any(c.isalnum() for c in tail)
        assert len(head.split()) <= max(limit, 1)


@given(_HAN, st.integers(0, 8))
def test_chinese_pieces_concatenate_back_and_are_never_empty(sentence: str, limit: int) -> None:
    head, tail = split_head(sentence, limit, chinese=True)
    assert head + tail == sentence
    if tail:
        assert any(c.isalnum() for c in head) and any(c.isalnum() for c in tail)
        assert sum(c.isalnum() for c in head) <= 3 * limit
