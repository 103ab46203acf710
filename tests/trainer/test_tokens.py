"""Token spans of reasoning and action, from the parser's character spans."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rubricgym.models import build_byte_tokenizer
from rubricgym.parsing import parse_response
from rubricgym.tokens import (
    char_to_token_span,
    decode_response,
    response_token_spans,
    token_char_offsets,
)

TOK = build_byte_tokenizer()


def _spans(text: str, ids: list[int]):
    parsed = parse_response(text)
    return parsed, response_token_spans(TOK, ids, text, parsed.reasoning_span, parsed.action_span)


def test_spans_cover_exactly_the_reasoning_and_action_text():
    text = "<think>the fridge is east</think>\n<action>go to fridge 1</action>"
    ids = TOK(text, add_special_tokens=False)["input_ids"] + [TOK.eos_token_id]
    assert decode_response(TOK, ids) == text  # EOS dropped, nothing else changed
    parsed, (reasoning, action) = _spans(text, ids)
    assert TOK.decode(ids[reasoning[0] : reasoning[1]]) == "the fridge is east"
    assert TOK.decode(ids[action[0] : action[1]]) == "go to fridge 1"
    assert reasoning[1] <= action[0]


def test_unparsed_response_has_no_action_tokens():
    text = "<think>no idea</think> go north"
    ids = TOK(text, add_special_tokens=False)["input_ids"]
    parsed, (reasoning, action) = _spans(text, ids)
    assert not parsed.ok and action is None
    assert TOK.decode(ids[reasoning[0] : reasoning[1]]) == "no idea"


def test_non_canonical_token_ids_use_prefix_decoding():
    """A sampled multi-byte character may arrive as byte tokens the encoder would never emit
    in that order; offsets must still land on the right characters."""
    text = "<action>café ✓</action>"
    ids = TOK(text, add_special_tokens=False)["input_ids"]
    # insert a special token in the middle: re-encoding can no longer reproduce ids
    ids2 = ids[:3] + [TOK.convert_tokens_to_ids("<|im_start|>")] + ids[3:]
    assert decode_response(TOK, ids2) == text
    offs = token_char_offsets(TOK, ids2)
    assert offs[3][0] == offs[3][1]  # the special token is empty
    parsed, (_, action) = _spans(text, ids2)
    assert "".join(TOK.decode(ids2[action[0] : action[1]], skip_special_tokens=True)) == "café ✓"


def test_token_overlapping_a_span_boundary_is_included():
    offsets = [(0, 3), (3, 9), (9, 12)]  # a token straddles the start of the span (5, 10)
    assert char_to_token_span(offsets, (5, 10)) == (1, 3)
    assert char_to_token_span(offsets, None) is None
    assert char_to_token_span(offsets, (12, 12)) is None


@given(
    reasoning=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="<>\x00"), max_size=40),
    action=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="<>\x00"), min_size=1, max_size=30),
    gap=st.sampled_from(["", "\n", "  "]),
)
def test_round_trip_and_spans_property(reasoning, action, gap):
    text = f"<think>{reasoning}</think>{gap}<action>{action}</action>"
    ids = TOK(text, add_special_tokens=False)["input_ids"]
    assert TOK.decode(ids) == text
    parsed, (r_span, a_span) = _spans(text, ids)
    if not parsed.ok:
        return  # whitespace-only action: an EMPTY_ACTION parse error, no action tokens
    assert TOK.decode(ids[a_span[0] : a_span[1]]) == parsed.action
    if parsed.reasoning:
        assert TOK.decode(ids[r_span[0] : r_span[1]]) == parsed.reasoning
        assert r_span[1] <= a_span[0]


@pytest.mark.slow
def test_smollm2_tokenizer_spans():
    from transformers import AutoTokenizer

    from rubricgym.models import smollm2_path

    tok = AutoTokenizer.from_pretrained(str(smollm2_path()))
    text = "<think>I should look in the fridge.</think>\n<action>go to fridge 1</action>"
    ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    assert decode_response(tok, ids) == text
    parsed = parse_response(text)
    r, a = response_token_spans(tok, ids, text, parsed.reasoning_span, parsed.action_span)
    assert tok.decode(ids[a[0] : a[1]]).strip() == "go to fridge 1"
    assert "fridge." in tok.decode(ids[r[0] : r[1]])
