from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipelines.errors import PermanentError
from pipelines.speech.numbers import number_to_words, ordinal_to_words, year_to_words
from pipelines.speech.text import (
    EmptyTextError,
    TextTooLongError,
    normalize,
    prepare,
    split_sentences,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (0, "zero"),
        (7, "seven"),
        (13, "thirteen"),
        (20, "twenty"),
        (21, "twenty-one"),
        (99, "ninety-nine"),
        (100, "one hundred"),
        (101, "one hundred one"),
        (110, "one hundred ten"),
        (999, "nine hundred ninety-nine"),
        (1000, "one thousand"),
        (1001, "one thousand one"),
        (12_345, "twelve thousand three hundred forty-five"),
        (1_000_000, "one million"),
        (2_000_500, "two million five hundred"),
        (1_000_000_001, "one billion one"),
        (-42, "minus forty-two"),
        (
            10**18,
            "one zero zero zero zero zero zero zero zero zero zero zero zero zero zero zero zero"
            " zero zero",
        ),
    ],
)
def test_number_to_words(n: int, words: str) -> None:
    assert number_to_words(n) == words


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (1, "first"),
        (2, "second"),
        (3, "third"),
        (4, "fourth"),
        (5, "fifth"),
        (8, "eighth"),
        (9, "ninth"),
        (11, "eleventh"),
        (12, "twelfth"),
        (20, "twentieth"),
        (21, "twenty-first"),
        (22, "twenty-second"),
        (100, "one hundredth"),
        (103, "one hundred third"),
        (1000, "one thousandth"),
    ],
)
def test_ordinal_to_words(n: int, words: str) -> None:
    assert ordinal_to_words(n) == words


@pytest.mark.parametrize(
    ("year", "words"),
    [
        (1999, "nineteen ninety-nine"),
        (1900, "nineteen hundred"),
        (1905, "nineteen oh five"),
        (2000, "two thousand"),
        (2005, "two thousand five"),
        (2010, "twenty ten"),
        (2026, "twenty twenty-six"),
        (1066, "ten sixty-six"),
    ],
)
def test_year_to_words(year: int, words: str) -> None:
    assert year_to_words(year) == words


@given(st.integers(min_value=0, max_value=10**15 - 1))
def test_number_words_are_plain_words(n: int) -> None:
    words = number_to_words(n)
    assert words.replace("-", " ").replace(" ", "").isalpha()
    assert "  " not in words


@given(st.integers(min_value=1, max_value=10**9))
def test_ordinals_end_like_ordinals(n: int) -> None:
    assert ordinal_to_words(n).endswith(("first", "second", "third", "th"))


CASES = [
    # numbers, decimals, signs
    ("I have 3 cats.", "I have three cats."),
    (
        "It weighs 1,234,567 grams.",
        "It weighs one million two hundred thirty-four thousand five hundred sixty-seven grams.",
    ),
    ("Pi is 3.14.", "Pi is three point one four."),
    ("It is -7 outside.", "It is minus seven outside."),
    ("Agent 007 waits.", "Agent zero zero seven waits."),
    ("Half is 0.5 here.", "Half is zero point five here."),
    ("Version 1.2.3 is out.", "Version one point two point three is out."),
    # ordinals
    ("The 1st, 2nd, 3rd and 22nd.", "The first, second, third and twenty-second."),
    ("On the 101st day.", "On the one hundred first day."),
    # money
    ("It costs $3.50.", "It costs three dollars and fifty cents."),
    ("Only $1.", "Only one dollar."),
    ("Just $0.99 now.", "Just ninety-nine cents now."),
    ("It is €10 today.", "It is ten euros today."),
    ("Pay £5.20 please.", "Pay five pounds and twenty pence please."),
    ("Pay 15€ now.", "Pay fifteen euros now."),
    ("About $2.5 million.", "About two point five million dollars."),
    ("They raised $3B.", "They raised three billion dollars."),
    ("Send USD 40 soon.", "Send forty dollars soon."),
    ("A loss of -$5.", "A loss of minus five dollars."),
    ("It is ¥500.", "It is five hundred yen."),
    # percentages
    ("Up 12.5% today.", "Up twelve point five percent today."),
    ("Down 50 % now.", "Down fifty percent now."),
    # dates
    ("Due 2026-12-02.", "Due December second, twenty twenty-six."),
    ("Due 12/02/2026.", "Due December second, twenty twenty-six."),
    ("Due 25/12/2026.", "Due December twenty-fifth, twenty twenty-six."),
    ("Due 1/5/26.", "Due January fifth, twenty twenty-six."),
    ("On March 3rd.", "On March third."),
    ("On Jan. 5, 2026.", "On January fifth, twenty twenty-six."),
    ("On 5 December 2026.", "On the fifth of December, twenty twenty-six."),
    ("Not a date 2026-13-45.", "Not a date two thousand twenty-six to thirteen to forty-five."),
    ("Born in 1999.", "Born in nineteen ninety-nine."),
    ("The 1990s and the 2000s.", "The nineteen nineties and the two thousands."),
    ("Back in the '80s.", "Back in the eighties."),
    # times
    ("Meet at 10:35.", "Meet at ten thirty-five."),
    ("Meet at 10:05.", "Meet at ten oh five."),
    ("Meet at 10:00.", "Meet at ten o'clock."),
    ("Meet at 15:00.", "Meet at fifteen hundred."),
    ("Meet at 3pm.", "Meet at three P M."),
    ("Meet at 7 a.m. sharp.", "Meet at seven A M. sharp."),
    ("Meet at 9:15 PM.", "Meet at nine fifteen P M."),
    ("Lap 1:02:03 done.", "Lap one oh two and three seconds done."),
    # abbreviations
    ("Dr. Smith met Mr. Jones.", "Doctor Smith met Mister Jones."),
    ("Mrs. Lee and Ms. Park.", "Missus Lee and Miz Park."),
    ("Fruit, e.g. apples.", "Fruit, for example, apples."),
    ("One thing, i.e. this.", "One thing, that is, this."),
    ("Cats vs. dogs.", "Cats versus dogs."),
    ("Apples, pears, etc. are fine.", "Apples, pears, et cetera. are fine."),
    ("Ask Prof. Xu.", "Ask Professor Xu."),
    ("Item No. 5 left.", "Item number five left."),
    ("St. Louis is big.", "Saint Louis is big."),
    # URLs and e-mail
    (
        "See https://www.example.com/docs?page=2 now.",
        "See example dot com slash docs question mark page equals two now.",
    ),
    ("Write to john.doe@example.org today.", "Write to john dot doe at example dot org today."),
    ("Go to example.com first.", "Go to example dot com first."),
    ("Try http://test-site.io/a_b.", "Try test dash site dot io slash a underscore b."),
    # symbols
    ("Tom & Jerry.", "Tom and Jerry."),
    ("2 + 2 = 4.", "two plus two equals four."),
    ("Meet @home.", "Meet at home."),
    ("Ranked #1.", "Ranked number one."),
    ("So #blessed.", "So hashtag blessed."),
    ("Open 24/7.", "Open twenty-four seven."),
    ("Add 1/2 cup and 3/4 cup.", "Add one half cup and three quarters cup."),
    ("Pages 5-10.", "Pages five to ten."),
    ("Screen 1920x1080.", "Screen one thousand nine hundred twenty by one thousand eighty."),
    ("Easy: 2*3.", "Easy: two times three."),
    ("It is 21°C.", "It is twenty-one degrees Celsius."),
    ("Drive 5 km.", "Drive five kilometers."),
    ("Files of 3 GB.", "Files of three gigabytes."),
    ("We love C++.", "We love C plus plus."),
    ("Use and/or both.", "Use and or both."),
    ("We have 5k users.", "We have five thousand users."),
    # markdown
    ("# Heading", "Heading"),
    ("## Sub heading ##", "Sub heading"),
    ("**Bold** and __strong__.", "Bold and strong."),
    ("*Italic* and _em_.", "Italic and em."),
    ("Some `code` here.", "Some code here."),
    ("A [link](http://example.com) here.", "A link here."),
    ("An ![alt text](img.png) here.", "An alt text here."),
    ("~~gone~~ kept.", "gone kept."),
    ("> quoted text.", "quoted text."),
    ("- item one", "item one"),
    ("* item two", "item two"),
    ("1. first item", "first item"),
    ("- [x] done task", "done task"),
    ("snake_case_name stays.", "snake case name stays."),
    ("Line<br>break.", "Line break."),
    # emoji
    ("Great job 👍🏽!", "Great job!"),
    ("Love ❤️ it.", "Love it."),
    ("Flags 🇺🇸 and 👨‍👩‍👧 family.", "Flags and family."),
    ("Legal © and ™.", "Legal copyright and trademark."),
]


@pytest.mark.parametrize(("text", "spoken"), CASES, ids=[c[0] for c in CASES])
def test_normalize(text: str, spoken: str) -> None:
    assert normalize(text) == spoken


def test_code_fences_and_lists_become_separate_lines() -> None:
    md = "# Title\n\nIntro text.\n\n```python\nx = 1\n```\n\n- one\n- two\n\n---\n\nEnd."
    assert prepare(md) == ["Title", "Intro text.", "x equals one", "one", "two", "End."]


def test_tables_read_as_lists() -> None:
    assert prepare("| a | b |\n|---|---|\n| 1 | 2 |") == ["a, b", "one, two"]


def test_split_sentences() -> None:
    text = 'First one. Second one! Third? "Quoted." Fourth: yes. 5 is a number.'
    assert split_sentences(text) == [
        "First one.",
        "Second one!",
        "Third?",
        '"Quoted."',
        "Fourth: yes.",
        "5 is a number.",
    ]


def test_split_keeps_decimals_and_lowercase_continuations() -> None:
    assert split_sentences("It is 3.5 m. and more. Then end.") == [
        "It is 3.5 m. and more.",
        "Then end.",
    ]


def test_long_sentence_is_cut_at_commas_then_spaces() -> None:
    sentence = ", ".join(["word " * 10] * 10).strip() + "."
    parts = split_sentences(sentence, max_chars=120)
    assert all(len(p) <= 120 for p in parts)
    assert len(parts) > 1
    assert " ".join(parts).split() == sentence.split()


def test_unbroken_text_is_still_cut() -> None:
    parts = split_sentences("x" * 1000, max_chars=300)
    assert [len(p) for p in parts] == [300, 300, 300, 100]


def test_too_long_text_has_a_clear_error() -> None:
    with pytest.raises(TextTooLongError, match="20001 characters long once numbers and symb"):
        normalize("a" * 20_001)
    with pytest.raises(TextTooLongError, match="40001 characters long, over the 40000"):
        normalize("a" * 40_001)
    assert issubclass(TextTooLongError, PermanentError)
    assert normalize("a" * 20_000) == "a" * 20_000


def test_limit_is_configurable() -> None:
    with pytest.raises(TextTooLongError, match="over the 10 character limit"):
        prepare("eleven char", max_chars=10)


@pytest.mark.parametrize("text", ["", "   ", "👍🏽🎉", "```\n```", "---", "**", "| |"])
def test_nothing_to_speak(text: str) -> None:
    with pytest.raises(EmptyTextError):
        prepare(text)


@given(st.text(max_size=300))
def test_normalize_never_crashes_and_leaves_no_digits_or_markup(text: str) -> None:
    spoken = normalize(text)
    assert not any(ch in spoken for ch in "*`#|$€£&@=")
    assert not any("0" <= ch <= "9" for ch in spoken)


def test_the_limit_applies_after_numbers_are_spelled_out() -> None:
    """4,000 digits are 4,000 characters as typed and about 20,000 as words."""
    with pytest.raises(TextTooLongError, match="once numbers and symbols are spelled out"):
        prepare("9" * 4000 + " 9")
    markup = "**a** " * 6000  # 36,000 characters of which 12,000 are spoken
    assert normalize(markup) == " ".join(["a"] * 6000)


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("9" * 19, " ".join(["nine"] * 19)),
        ("$" + "1" * 30, " ".join(["one"] * 30) + " dollars"),
        ("1" * 25 + "th", " ".join(["one"] * 24) + " first"),
        ("$" + "0" * 25 + "1", "one dollar"),
        ("0" * 30 + "%", " ".join(["zero"] * 30) + " percent"),
    ],
)
def test_long_digit_runs_are_read_digit_by_digit(text: str, spoken: str) -> None:
    assert normalize(text) == spoken


@pytest.mark.parametrize(
    "text", ["9" * 5000, "$" + "9" * 4400, "9" * 4400 + "th", "-" + "9" * 4400]
)
def test_digit_runs_past_the_int_limit_are_refused_with_a_message(text: str) -> None:
    with pytest.raises(TextTooLongError, match="once numbers and symbols are spelled out"):
        normalize(text)
    assert len(normalize(text[:3000])) < 20_000
