"""Pure fact extraction on recorded strings: command syntax, rendering, mentions, leads."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rubricgym.adapters.searchqa import observe
from rubricgym.adapters.searchqa.data import Passage


@pytest.mark.parametrize("text,parsed", [
    ("search[Velmora river]", ("search", "Velmora river")),
    ("  Search[ who founded X ] ", ("search", "who founded X")),
    ("open[2]", ("open", "2")),
    ("read[10]", ("read", "10")),
    ("answer[Asker River]", ("answer", "Asker River")),
    ("open[two]", None),
    ("open[]", None),
    ("search Velmora", None),
    ("search[a]b]", None),
    ("fly[away]", None),
    ("search[unclosed", None),
    ("", None),
])
def test_parse_command(text, parsed):
    assert observe.parse_command(text) == parsed


@given(st.text(max_size=400))
def test_parse_command_never_raises(text):
    out = observe.parse_command(text)
    assert out is None or (out[0] in observe.TRCA_VERBS and out[1])


def test_rendering_follows_search_r1():
    passages = [Passage(id="1", title="Velmora", text="Velmora lies on the Asker River."),
                Passage(id="2", title="Asker River", text="A river.")]
    info = observe.render_information(passages)
    assert info.strip() == ("<information>Doc 1(Title: Velmora) Velmora lies on the Asker River.\n"
                            "Doc 2(Title: Asker River) A river.</information>")
    assert "No results" in observe.render_information([])
    page = observe.render_results("velmora", passages)
    assert page.splitlines()[1].startswith("[1] Velmora: ")
    doc = observe.render_document("Velmora", passages[:1])
    assert doc.splitlines()[1] == "[1] Velmora lies on the Asker River."
    assert observe.admissible_listing(2, 1) == ["search[<query>]", "open[1]", "open[2]", "read[1]", "answer[<text>]"]


def test_mentions_titles_and_leads():
    text = "Dunlin Instruments is a company founded in 1950 by Vincor Zelner."
    assert observe.mentioned(text, ["Dunlin Instruments", "Vincor", "Zel"]) == ["Dunlin Instruments", "Vincor"]
    assert observe.title_matches(["The Silent Harbor"], ["the silent harbor", "Harbor"]) == ["the silent harbor"]
    names = observe.name_words(text)
    assert {"dunlin", "instruments", "vincor", "zelner"} <= names and "founded" not in names
    question = "In what year was the founder of Dunlin Instruments born?"
    assert observe.discovered_in_query("Vincor Zelner born year", names, question)
    assert not observe.discovered_in_query("Dunlin Instruments founder", names, question)
    assert not observe.discovered_in_query("vincor zelner", set(), question)  # nothing seen before
    assert observe.has_markup("<answer>x</answer>") and not observe.has_markup("a < b")
