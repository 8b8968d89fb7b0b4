"""Chinese text for speech: numbers, dates, times, money and percentages become Chinese
words; sentences end at Chinese punctuation."""

from __future__ import annotations

import pytest

from pipelines.speech.text import EmptyTextError, TextTooLongError
from pipelines.speech.text_zh import cardinal_zh, normalize_zh, prepare_zh, split_sentences_zh

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("digits", "words"),
    [
        ("0", "零"),
        ("10", "十"),
        ("15", "十五"),
        ("20", "二十"),
        ("101", "一百零一"),
        ("110", "一百一十"),
        ("1005", "一千零五"),
        ("10010", "一万零一十"),
        ("100000", "十万"),
        ("1000001", "一百万零一"),
        ("120000000", "一亿二千万"),
    ],
)
def test_cardinals_read_the_chinese_way(digits: str, words: str) -> None:
    assert cardinal_zh(digits) == words


def test_dates_times_money_and_percentages_become_words() -> None:
    text = "2026年12月2日下午3:30，价格¥1,250.50，增长12.5%；2026-12-02见。"
    assert normalize_zh(text) == (
        "二〇二六年十二月二日下午三点三十分，价格一千二百五十点五零元，增长百分之十二点五；"
        "二〇二六年十二月二日见。"
    )


def test_long_bare_digit_runs_are_read_digit_by_digit() -> None:
    assert normalize_zh("电话13800138000") == "电话一三八〇〇一三八〇〇〇"
    assert normalize_zh("共100,000,000元") == "共一亿元"


def test_sentences_end_at_chinese_punctuation_and_long_ones_are_cut() -> None:
    assert split_sentences_zh("你好。今天好吗？很好！") == ["你好。", "今天好吗？", "很好！"]
    long = "这是一个很长的句子，" * 40
    pieces = split_sentences_zh(long, max_chars=50)
    assert all(len(p) <= 50 for p in pieces)
    assert "".join(pieces) == long
    assert pieces[0].endswith("，")


def test_bad_text_gets_a_specific_error() -> None:
    with pytest.raises(EmptyTextError):
        prepare_zh("。。。！！")
    with pytest.raises(TextTooLongError):
        prepare_zh("中" * 50, max_chars=10)
