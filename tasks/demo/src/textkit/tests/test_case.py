import pytest
from textkit import split_words, title_case, to_camel, to_constant, to_kebab, to_pascal, to_snake


@pytest.mark.parametrize(
    ("identifier", "expected"),
    [
        ("parseResponseBody", ["parse", "Response", "Body"]),
        ("ParseResponseBody", ["Parse", "Response", "Body"]),
        ("parse_response_body", ["parse", "response", "body"]),
        ("parse-response-body", ["parse", "response", "body"]),
        ("PARSE_RESPONSE_BODY", ["PARSE", "RESPONSE", "BODY"]),
        ("getHTTP", ["get", "HTTP"]),
        ("user_id-v2", ["user", "id", "v", "2"]),
        ("", []),
    ],
)
def test_split_words(identifier, expected):
    assert split_words(identifier) == expected


def test_conversions():
    assert to_snake("parseResponseBody") == "parse_response_body"
    assert to_kebab("ParseResponseBody") == "parse-response-body"
    assert to_constant("parse-response-body") == "PARSE_RESPONSE_BODY"
    assert to_pascal("parse_response_body") == "ParseResponseBody"
    assert to_camel("PARSE_RESPONSE_BODY") == "parseResponseBody"


def test_round_trip():
    for name in ("load_user_profile", "max_retry_count", "x"):
        assert to_snake(to_camel(name)) == name
        assert to_snake(to_pascal(name)) == name


def test_title_case_small_words():
    assert title_case("the lord of the rings") == "The Lord of the Rings"
    assert title_case("a tale of two cities") == "A Tale of Two Cities"


def test_title_case_first_and_last_words_are_capitalised():
    assert title_case("what are you looking at") == "What Are You Looking At"


def test_title_case_keeps_mixed_case_words():
    assert title_case("my new iPhone and the NASA launch") == "My New iPhone and the NASA Launch"


def test_title_case_preserves_punctuation_and_spacing():
    assert title_case("hello,  world: my story") == "Hello,  World: My Story"
