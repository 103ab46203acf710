from hypothesis import given, strategies as st

from rubricgym.contract import ParseError
from rubricgym.parsing import TagGrammar, parse_response


def test_think_and_action_with_spans():
    text = "<think> go to the fridge </think>\n<action>  go to fridge 1 </action>"
    p = parse_response(text)
    assert p.ok and p.kind == "action" and p.action == "go to fridge 1"
    assert text[slice(*p.action_span)] == "go to fridge 1"
    assert text[slice(*p.reasoning_span)] == "go to the fridge"


def test_action_without_reasoning_is_fine():
    p = parse_response("<action>look</action>")
    assert p.ok and p.reasoning is None and p.reasoning_span is None


def test_tags_are_case_insensitive():
    assert parse_response("<ACTION>look</Action>").action == "look"


def test_failures_are_classified():
    cases = {
        "just text": ParseError.MISSING_TAG,
        "": ParseError.MISSING_TAG,
        "<action>look": ParseError.UNCLOSED_TAG,
        "<action>a</action><action>b</action>": ParseError.MULTIPLE_ACTIONS,
        "<action>   </action>": ParseError.EMPTY_ACTION,
        "x" * 200_000: ParseError.TOO_LONG,
        "<action>a\x00</action>": ParseError.INVALID_TEXT,
        "<action>\ud800</action>": ParseError.INVALID_TEXT,
    }
    for text, error in cases.items():
        p = parse_response(text)
        assert not p.ok and p.error == error, (text[:40], p)
    assert parse_response(None).error == ParseError.INVALID_TEXT  # type: ignore[arg-type]


def test_reasoning_is_kept_on_failure():
    p = parse_response("<think>hmm</think> no action")
    assert not p.ok and p.reasoning == "hmm"


def test_search_r1_grammar_first_block_decides():
    g = TagGrammar(action_tags=("search", "answer"), on_multiple="first")
    p = parse_response("<think>x</think><search>paris</search><answer>no</answer>", g)
    assert p.ok and p.kind == "search" and p.action == "paris"
    assert parse_response("<answer> 42 </answer>", g).kind == "answer"


def test_hundred_kilobyte_response_with_action_inside_limit():
    g = TagGrammar(max_chars=200_000)
    text = "<think>" + "a" * 100_000 + "</think><action>look</action>"
    p = parse_response(text, g)
    assert p.ok and p.action == "look" and len(p.reasoning) == 100_000


@given(st.text(max_size=400))
def test_never_raises_and_spans_are_consistent(text):
    p = parse_response(text)
    assert p.ok == (p.error is None)
    if p.ok:
        assert text[slice(*p.action_span)] == p.action and p.action.strip() == p.action
    if p.reasoning_span:
        assert text[slice(*p.reasoning_span)] == p.reasoning


CLEAN = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00<")


@given(st.text(CLEAN, max_size=60), st.text(CLEAN, max_size=60).filter(str.strip))
def test_roundtrip_of_wellformed_responses(reasoning, action):
    p = parse_response(f"<think>{reasoning}</think><action>{action}</action>")
    assert p.ok and p.action == action.strip()


FENCED = TagGrammar(fence_kind="python")


def test_fenced_code_block_is_an_action():
    text = "<think>list songs</think>\n```python\nprint(1)\n```\n"
    p = parse_response(text, FENCED)
    assert p.ok and p.kind == "python" and p.action == "print(1)"
    assert text[slice(*p.action_span)] == "print(1)" and p.reasoning == "list songs"


def test_fence_inside_action_tag_stays_content_and_tags_inside_fence_are_ignored():
    p = parse_response("<action>```python\nx = 1\n```</action>", FENCED)
    assert p.ok and p.kind == "action" and p.action.startswith("```python")
    p = parse_response("```python\ns = '<action>'\n```", FENCED)
    assert p.ok and p.kind == "python" and p.action == "s = '<action>'"


def test_fence_failures():
    assert parse_response("```python\nx = 1\n", FENCED).error == ParseError.UNCLOSED_TAG
    two = "```python\na\n```\n```python\nb\n```"
    assert parse_response(two, FENCED).error == ParseError.MULTIPLE_ACTIONS
    assert parse_response("```python\n```", FENCED).error == ParseError.EMPTY_ACTION
    assert parse_response("```python\nx\n```").error == ParseError.MISSING_TAG  # not enabled


@given(st.text(max_size=300))
def test_fenced_grammar_never_raises(text):
    p = parse_response(text, FENCED)
    if p.ok:
        assert text[slice(*p.action_span)] == p.action
