"""SearchQA's observable facts and the binding its operators read (what the question asks
for, never its answer)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from rubricgym import Facts, TaskBinding

AnswerFormat = Literal["", "person", "place", "date", "number", "yes_no", "entity"]


class SearchQABinding(TaskBinding):
    """Extracted from the question by ``bind_task`` (deterministic, no model, no gold answer).

    Empty fields mean the rules could not determine them; operators then return 0.
    """

    answer_format: AnswerFormat = Field("", description="expected answer type from the wh-word and cue words")
    target_entities: list[str] = Field(default_factory=list, description="quoted titles and capitalised name spans, as written")
    relation: str = Field("", description="main predicate words, lower-case, wh-word, entities and constraints removed")
    constraints: list[str] = Field(default_factory=list, description="years, ordinals, superlatives, 'before 1990'-style bounds")


SearchTool = Literal["", "search", "answer", "open", "read"]
AnswerKind = Literal["", "yes_no", "number", "date", "entity"]


class SearchQAFacts(Facts):
    """What one SearchQA step showed the agent; computed from the action and the text the
    retriever returned (never from gold answers or supporting-passage labels)."""

    benchmark: ClassVar[str] = "SearchQA"

    grammar: str = Field("", description="action grammar of the episode: search-r1 | trca")
    tool: SearchTool = Field("", description="the action's tool: search, answer, open, read ('' when unparsed or malformed)")
    malformed: bool = Field(False, description="the action text does not fit its tool's syntax (e.g. 'open[x]', markup inside a query)")
    action_allowed: bool = Field(False, description="the tool is available now and its index is in range (open/read)")
    query: str = Field("", description="the search query, normalized (lower-case, no punctuation, single spaces)")
    query_repeated: bool = Field(False, description="the same normalized query was searched earlier this episode")
    query_targets: list[str] = Field(default_factory=list, description="bound target entities the query names")
    query_uses_discovered_entity: bool = Field(
        False, description="the query names a document title first shown by an earlier step, not named in the question")
    result_ids: list[str] = Field(default_factory=list, description="passage ids listed or shown by this step")
    new_result_ids: list[str] = Field(default_factory=list, description="result_ids never listed or shown before this episode")
    num_results: int = Field(0, description="number of passages this step listed or shown")
    new_passage_ids: list[str] = Field(default_factory=list, description="passages whose full text was shown for the first time")
    result_titles: list[str] = Field(default_factory=list, description="titles of the passages/documents this step showed")
    mentioned_targets: list[str] = Field(default_factory=list, description="bound target entities mentioned in the text shown this step")
    target_titles: list[str] = Field(default_factory=list, description="bound target entities that are the title of a shown result")
    seen_targets: list[str] = Field(default_factory=list, description="bound target entities mentioned in any text shown so far this episode")
    revealed_value_kinds: list[str] = Field(
        default_factory=list, description="kinds of values (date, number) in the text shown this step")
    opened_title: str = Field("", description="title of the document opened this step (trca grammar)")
    answer: str = Field("", description="the submitted answer, as written (cut to 200 characters)")
    answer_words: int = Field(0, description="number of words in the normalized answer")
    answer_kind: AnswerKind = Field("", description="form of the submitted answer: yes_no, number, date or entity")
    answer_in_evidence: bool = Field(False, description="the normalized answer occurs in text shown earlier this episode")
    searches: int = Field(0, description="searches issued so far this episode, this one included")
    turns_left: int = Field(0, description="turns left in the episode's budget after this step")
