import pytest
from textkit import slugify, transliterate, unique_slug


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, World!", "hello-world"),
        ("  Leading and trailing  ", "leading-and-trailing"),
        ("Crème brûlée, 2 ways!", "creme-brulee-2-ways"),
        ("Straße in Łódź", "strasse-in-lodz"),
        ("multiple --- dashes", "multiple-dashes"),
        ("日本語", ""),
    ],
    ids=["punctuation", "spaces", "accents", "special-letters", "dashes", "no-latin"],
)
def test_slugify(text, expected):
    assert slugify(text) == expected


def test_custom_separator():
    assert slugify("Hello big world", separator="_") == "hello_big_world"


def test_keep_case():
    assert slugify("Hello World", lowercase=False) == "Hello-World"


def test_stopwords_are_case_insensitive():
    assert slugify("The Art of War", stopwords={"the", "OF"}) == "art-war"


@pytest.mark.parametrize(
    ("length", "expected"),
    [(5, "hello"), (7, "hello"), (11, "hello-world"), (13, "hello-world"), (3, "hel")],
)
def test_max_length_cuts_at_word_boundary(length, expected):
    assert slugify("Hello world", max_length=length) == expected


def test_invalid_arguments():
    with pytest.raises(ValueError):
        slugify("x", separator="")
    with pytest.raises(ValueError):
        slugify("x", max_length=0)


def test_transliterate_keeps_ascii():
    assert transliterate("plain ASCII 123") == "plain ASCII 123"
    assert transliterate("Ærø") == "AEro"


def test_unique_slug():
    existing = {"report", "report-2"}
    assert unique_slug("Report", existing) == "report-3"
    assert unique_slug("Summary", existing) == "summary"
