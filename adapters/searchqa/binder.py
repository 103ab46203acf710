"""Task binder: a question -> ``SearchQABinding`` (deterministic, no model).

Questions come in NQ style ("who sings does he love me with reba", lower-case, no '?') and
HotpotQA style ("Which magazine was started first, Arthur's Magazine or First for Women?").
The answer format comes from the wh-word and cue phrases; entities from quoted spans and
runs of capitalised words (so lower-case NQ questions yield none rather than a guess);
constraints from years, ordinals, superlatives and temporal bounds; the relation is what is
left after removing those and function words.
"""

from __future__ import annotations

import regex

from rubricgym.adapters.searchqa.facts import SearchQABinding

MAX_CHARS = 1000  # questions are one sentence; longer input is cut
_T = 0.5  # regex timeout (seconds) on question text

AUXILIARIES = ("is", "are", "was", "were", "do", "does", "did", "can", "could", "has", "have", "had",
               "will", "would", "should", "shall", "may", "might", "must")
PERSON_NOUNS = ("person", "man", "woman", "actor", "actress", "singer", "player", "president", "author",
                "writer", "director", "king", "queen", "composer", "artist", "band member", "scientist",
                "politician", "poet", "musician", "founder", "ceo", "leader", "character")
PLACE_NOUNS = ("country", "city", "state", "place", "town", "county", "continent", "island", "river",
               "region", "province", "village", "location", "mountain", "lake", "nation")
DATE_NOUNS = ("year", "date", "day", "month", "century", "decade", "season", "time")
SUPERLATIVES = ("first", "last", "latest", "earliest", "largest", "biggest", "smallest", "highest", "lowest",
                "longest", "shortest", "oldest", "youngest", "most", "least", "best", "worst", "newest",
                "fastest", "tallest", "only", "older", "younger", "larger", "smaller", "longer", "shorter",
                "earlier", "later", "more", "fewer", "higher", "lower")
ORDINALS = ("second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh",
            "twelfth")
STOPWORDS = frozenset(
    "a an the of in on at to for by from with and or as that this these those it its his her their there "
    "what which who whom whose when where why how is are was were be been being do does did has have had "
    "will would can could should shall may might must than into about also".split()
)
CONNECTORS = frozenset("of the and de la le von van du del da di for on in & 's".split())

_YES_NO = regex.compile(rf"^(?:{'|'.join(AUXILIARIES)})(?:n't)?\b")
_NUMBER = regex.compile(r"\bhow\s+(?:many|much|long|old|far|tall|high|big|large|deep|wide|often|fast)\b|"
                        r"\bwhat\s+(?:is\s+the\s+)?(?:number|percentage|amount|population|size|age|height|length)\b")
_DATE = regex.compile(rf"\bwhen\b|\b(?:what|which)\s+(?:{'|'.join(DATE_NOUNS)})s?\b|\bin\s+what\s+year\b")
_PERSON = regex.compile(rf"\bwho(?:m|se)?\b|\b(?:what|which)\s+(?:[a-z]+\s+)?(?:{'|'.join(PERSON_NOUNS)})s?\b")
_PLACE = regex.compile(rf"\bwhere\b|\b(?:what|which)\s+(?:[a-z]+\s+)?(?:{'|'.join(PLACE_NOUNS)})s?\b")
_ENTITY = regex.compile(r"\b(?:what|which|name)\b")
_QUOTED = regex.compile(r"\"([^\"\n]{1,120})\"|“([^”\n]{1,120})”|(?<![\w])'([^'\n]{2,120})'(?![\w])")
_CAP_RUN = regex.compile(r"[A-Z0-9][\w.'&\-]*(?:\s+(?:(?:of|the|and|de|la|le|von|van|du|del|da|di|for|on|in|&)\s+)*[A-Z0-9][\w.'&\-]*)*")
_YEAR_BOUND = regex.compile(r"\b(?:before|after|since|until|by|in|during|from|between|prior\s+to)\s+(?:the\s+)?"
                            r"(?:1[0-9]{3}|20[0-9]{2})s?(?:\s+and\s+(?:1[0-9]{3}|20[0-9]{2}))?\b")
_YEAR = regex.compile(r"\b(?:1[0-9]{3}|20[0-9]{2})s?\b")
_ORDINAL = regex.compile(rf"\b(?:\d{{1,4}}(?:st|nd|rd|th)|{'|'.join(ORDINALS)})\b")
_SUPERLATIVE = regex.compile(rf"\b(?:{'|'.join(SUPERLATIVES)})\b")
_WORD = regex.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_WS = regex.compile(r"\s+")


def answer_format(question: str) -> str:
    """Expected answer type; '' when no cue decides it."""
    q = question.lower().strip()
    if _YES_NO.match(q, timeout=_T) and not regex.search(r"\b(?:who|what|which|when|where|how)\b", q.split(",")[0], timeout=_T):
        return "yes_no"
    best: tuple[int, int, str] | None = None  # the earliest cue decides ("what position ... the woman who")
    for rank, (fmt, pattern) in enumerate((("number", _NUMBER), ("date", _DATE), ("person", _PERSON),
                                           ("place", _PLACE), ("entity", _ENTITY))):
        m = pattern.search(q, timeout=_T)
        if m and (best is None or (m.start(), rank) < best[:2]):
            best = (m.start(), rank, fmt)
    return best[2] if best else ""


def _entities(question: str) -> list[str]:
    found: list[str] = []
    spans: list[tuple[int, int]] = []
    for m in _QUOTED.finditer(question, timeout=_T):
        found.append(next(g for g in m.groups() if g).strip())
        spans.append(m.span())
    first = _WORD.search(question.lower(), timeout=_T)
    for m in _CAP_RUN.finditer(question, timeout=_T):
        if any(a <= m.start() < b for a, b in spans):
            continue
        words = m.group(0).split()
        # the sentence-initial capital is grammar, not a name, when it is a question/function word
        if first and first.start() == m.start() \
                and words[0].lower() in STOPWORDS | set(AUXILIARIES):
            words = words[1:]
            while words and words[0].lower() in CONNECTORS:
                words = words[1:]
        while words and words[-1].lower() in CONNECTORS:
            words = words[:-1]
        for span in _split_pair(words):
            if regex.search(r"[A-Z]", span, timeout=_T):  # "1990 and 2000" is a constraint, not a name
                found.append(span)
    return list(dict.fromkeys(found))


def _split_pair(words: list[str]) -> list[str]:
    """'Scott Derrickson and Ed Wood' names two people; 'Kiss and Tell' is one title."""
    if "and" in words:
        i = words.index("and")
        left, right = words[:i], words[i + 1:]
        if len(left) >= 2 and len(right) >= 2:
            return [" ".join(left).strip(".,'"), " ".join(right).strip(".,'")]
    return [" ".join(words).strip(".,'")]


def _constraints(q: str) -> list[str]:
    found: list[str] = []
    covered: list[tuple[int, int]] = []
    for pattern in (_YEAR_BOUND, _YEAR, _ORDINAL, _SUPERLATIVE):
        for m in pattern.finditer(q, timeout=_T):
            if any(a <= m.start() < b for a, b in covered):
                continue
            found.append(_WS.sub(" ", m.group(0), timeout=_T))
            covered.append(m.span())
    return list(dict.fromkeys(found))


def _relation(q: str, entities: list[str], constraints: list[str]) -> str:
    for phrase in sorted(entities + constraints, key=len, reverse=True):
        q = regex.sub(rf"(?<![\w]){regex.escape(phrase.lower())}(?![\w])", " ", q, timeout=_T)
    words = [w for w in _WORD.findall(q, timeout=_T) if w not in STOPWORDS and w not in AUXILIARIES
             and not w.isdigit() and w not in ("many", "much", "name")]
    return " ".join(words)


def bind_task(question: str) -> SearchQABinding:
    """Parse a question into its binding; takes only the question, never raises on text."""
    text = _WS.sub(" ", question[:MAX_CHARS]).strip()
    try:
        entities = _entities(text)
        lower = text.lower()
        constraints = _constraints(lower)
        return SearchQABinding(answer_format=answer_format(lower), target_entities=entities,
                               relation=_relation(lower, entities, constraints), constraints=constraints)
    except TimeoutError:  # pathological text: report nothing rather than a partial guess
        return SearchQABinding()
