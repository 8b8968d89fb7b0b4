"""Numbers as American English words: cardinals, ordinals, years, decimals, digit strings."""

from __future__ import annotations


def word_list(spec: str) -> list[str]:
    return spec.split()


def word_table(spec: str) -> dict[str, str]:
    return dict(pair.split("=", 1) for pair in spec.split(";"))


ONES = word_list(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
    " fifteen sixteen seventeen eighteen nineteen"
)
TENS = word_list("_ _ twenty thirty forty fifty sixty seventy eighty ninety")
_SCALES = ("", " thousand", " million", " billion", " trillion", " quadrillion")
_ORDINALS = word_table(
    "one=first;two=second;three=third;five=fifth;eight=eighth;nine=ninth;twelve=twelfth"
)
MONTHS = word_list(
    "January February March April May June July August September October November December"
)


# Beyond the quadrillions (and long before int() refuses a 4,300-digit string) numbers are
# read digit by digit, without ever converting them.
MAX_CARDINAL_DIGITS = 18


def digits_to_words(digits: str) -> str:
    return " ".join(ONES[int(d)] for d in digits if d.isdigit())


def number_to_words(n: int) -> str:
    """Cardinal number in words; beyond the quadrillions it is read digit by digit."""
    if n < 0:
        return "minus " + number_to_words(-n)
    if n < 20:
        return ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return TENS[tens] + (f"-{ONES[ones]}" if ones else "")
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return f"{ONES[hundreds]} hundred" + (f" {number_to_words(rest)}" if rest else "")
    if n >= 1000 ** len(_SCALES):
        return digits_to_words(str(n))
    parts: list[str] = []
    for scale in _SCALES:
        n, chunk = divmod(n, 1000)
        if chunk:
            parts.append(number_to_words(chunk) + scale)
        if not n:
            break
    return " ".join(reversed(parts))


def cardinal(digits: str) -> str:
    """A string of ASCII digits as a cardinal, or digit by digit past the quadrillions."""
    if len(digits) > MAX_CARDINAL_DIGITS:
        return digits_to_words(digits)
    return number_to_words(int(digits))


def ordinal_to_words(n: int) -> str:
    return _ordinal(number_to_words(n))


def ordinal_digits(digits: str) -> str:
    """'21' -> twenty-first; a long run is read digit by digit with the last one ordinal."""
    return _ordinal(cardinal(digits.lstrip("0") or "0"))


def _ordinal(words: str) -> str:
    cut = max(words.rfind(" "), words.rfind("-")) + 1
    head, last = words[:cut], words[cut:]
    if last in _ORDINALS:
        return head + _ORDINALS[last]
    if last.endswith("y"):
        return head + last[:-1] + "ieth"
    return head + last + "th"


def year_to_words(year: int) -> str:
    """1999 -> nineteen ninety-nine, 2005 -> two thousand five, 1905 -> nineteen oh five."""
    if not 1000 <= year <= 9999 or 2000 <= year <= 2009:
        return number_to_words(year)
    high, low = divmod(year, 100)
    if low == 0:
        return f"{number_to_words(high)} hundred"
    if low < 10:
        return f"{number_to_words(high)} oh {ONES[low]}"
    return f"{number_to_words(high)} {number_to_words(low)}"


def decimal_to_words(text: str) -> str:
    """'1,234.50' -> one thousand two hundred thirty-four point five zero."""
    whole, _, frac = text.replace(",", "").partition(".")
    words = integer_words(whole) if whole else "zero"
    return f"{words} point {digits_to_words(frac)}" if frac else words


def integer_words(digits: str) -> str:
    if len(digits) > 1 and digits.startswith("0"):
        return digits_to_words(digits)  # 007, zip codes: say each digit
    return cardinal(digits)
