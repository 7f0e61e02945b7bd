"""Engine lists: parsing, the refusal of plain TCP, and picking by free slots."""

from __future__ import annotations

import pytest

from repogym.errors import DockerUnavailable
from repogym.sandbox import engines
from repogym.sandbox.engines import Engine, parse_engine, parse_engines


def test_a_list_parses_with_its_options_and_round_trips() -> None:
    listed = parse_engines("unix:///run/a.sock?slots=4, ssh://ci@box1  tcp://box2:2376?tls=/c"
                           ",unix:///run/a.sock")
    assert [e.url for e in listed] == ["unix:///run/a.sock", "ssh://ci@box1", "tcp://box2:2376"]
    assert listed[0].slots == 4 and listed[1].slots is None and listed[2].tls == "/c"
    assert [parse_engine(e.spec) for e in listed] == listed


@pytest.mark.parametrize("text, fix", [
    ("tcp://10.0.0.5:2375", "without TLS"),
    ("http://box:2375", "write unix://"),
    ("ssh://box?slot=3", "unknown option"),
    ("ssh://box?slots=many", "not a whole number"),
])
def test_bad_engines_say_what_to_write(text: str, fix: str) -> None:
    with pytest.raises(ValueError, match=fix):
        parse_engine(text)


def test_plain_tcp_is_allowed_on_loopback_only() -> None:
    assert parse_engine("tcp://127.0.0.1:2375").tls_dir() is None


def test_the_engine_with_most_free_slots_wins_and_a_silent_one_is_taken_out(
        monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, c = (Engine(f"ssh://box{i}") for i in "abc")
    free = {a.url: 3, b.url: 5}

    def fake_free(engine: Engine, client: object = None) -> int:
        if engine.url not in free:
            raise DockerUnavailable(f"engine at {engine.url}: refused")
        return free[engine.url]

    monkeypatch.setattr(engines, "free_slots", fake_free)
    monkeypatch.setattr(engines, "_out", {})
    assert engines.pick([a, b, c]) == b
    assert engines.is_out(c.url)  # it did not answer: taken out
    assert engines.pick([a, b], taken={b.url: 4}) == a  # 3 free beats 5 - 4 promised
    assert engines.pick([a, b], exclude={b.url}) == a
    with pytest.raises(DockerUnavailable, match="none of the engines answers"):
        engines.pick([c])
