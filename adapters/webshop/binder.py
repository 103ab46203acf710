"""Task binder: a WebShop goal instruction -> ``WebShopBinding`` (deterministic, no model).

WebShop goals are one sentence: a request phrase, the product noun phrase, feature clauses,
option pairs and a price bound, e.g. "i need a long clip-in hair extension which is natural
looking, and price lower than 40.00 dollars". The rules peel off the price bound and the
options first, then split the rest at clause connectors: the last phrase before the first
connector is the product, everything else is an attribute. A field the rules cannot fill
stays empty; nothing is guessed.
"""

from __future__ import annotations

import regex

from rubricgym.adapters.webshop.facts import WebShopBinding

MAX_CHARS = 2000  # goals are one sentence; longer input is cut, never scanned unbounded
_T = 0.5  # regex timeout (seconds) on instruction text

OPTION_KEYS = (
    "item package quantity", "package quantity", "number of items", "special size", "pattern name",
    "flavor name", "hair length", "fit type", "team name", "color", "colour", "size", "style", "flavor",
    "flavour", "scent", "pattern", "material", "count", "capacity", "length", "width", "configuration",
    "model", "design", "shape", "pack",
)
# Multi-word features WebShop goals put in front of the product noun ("machine wash men's shirts").
FEATURE_PHRASES = (
    "machine washable", "machine wash", "hand wash", "dry clean", "long lasting", "easy to use",
    "easy to clean", "easy to install", "easy to carry", "high quality", "high performance", "gluten free",
    "sugar free", "dairy free", "fat free", "non gmo", "non toxic", "cruelty free", "paraben free",
    "alcohol free", "fragrance free", "bpa free", "low calorie", "low carb", "low sugar", "low fat",
    "keto friendly", "plant based", "ready to eat", "ready to use", "water resistant", "waterproof",
    "slim fit", "regular fit", "relaxed fit", "loose fit", "short sleeve", "long sleeve", "wireless",
    "organic", "natural", "vegan", "lightweight", "heavy duty", "stainless steel", "non slip",
    "anti slip", "quick release", "fast charging", "travel size", "hands free", "noise cancelling",
)

_PRICE = regex.compile(
    r"(?:,\s*)?(?:\band\s+)?(?:with\s+(?:a\s+)?)?price\s+(?:lower|less|cheaper|under|below)(?:\s+than)?\s*"
    r"\$?\s*(\d{1,7}(?:\.\d{1,2})?)\s*(?:dollars?|usd|\$)?"
)
_KEY = "|".join(regex.escape(k) for k in OPTION_KEYS)
_OPTION = regex.compile(
    rf"(?:\band\s+)?\b({_KEY})\s*:\s*([^,;:]{{1,60}}?)\s*(?=[,;]|$|\band\s+(?:{_KEY})\s*:)"
)
_IN_COLOR = regex.compile(r"\bin\s+(?:the\s+)?(?:colou?r\s+)?(?!(?:the|a|an|colou?r)\b)([a-z]+(?:[ -][a-z]+)?)\s+colou?r(?:ed)?\b")
_COLOR_OF = regex.compile(r"\bin\s+(?:the\s+)?colou?r\s+(?!:)([a-z]+(?:[ -][a-z]+)?)\b")
_IN_SIZE = regex.compile(r"\bin\s+(?:a\s+|the\s+)?size\s+(?:of\s+)?([a-z0-9.\-/]+(?:\s+[a-z0-9.\-/]+)?)\b")
_SIZE_IN = regex.compile(r"\bin\s+(?:a\s+|the\s+)?([a-z0-9.\-/]+(?:\s+[a-z0-9.\-/]+)?)\s+size\b")
_SIZE_BARE = regex.compile(
    r"(?:^|(?<=[,;]\s?)|\band\s+)size\s+(\d[\d.\-/]*(?:\s*(?:x|w|l)\s*\d[\d.]*)?|x*-?(?:small|large)|small|medium|large)\b"
)
_QUANTITY = regex.compile(r"(?:^|(?<=\b(?:a|an|the)\s))(\d{1,4}\s*-?\s*(?:pack|count|pcs|pieces|ct|pk))(?:\s+of)?\b")
_REQUEST = regex.compile(
    r"^(?:please\s+)?(?:i(?:'m|\s+am)\s+(?:looking|searching|shopping)\s+for|i\s+(?:would|'d)\s+like(?:\s+to\s+"
    r"(?:buy|get|order|find|have|purchase))?|i\s+(?:need|want)(?:\s+to\s+(?:buy|get|order|find|purchase))?|"
    r"(?:can|could)\s+you\s+(?:please\s+)?(?:find|get|show|help\s+me\s+find)(?:\s+me)?|find\s+me|get\s+me|"
    r"show\s+me|buy\s+me|help\s+me\s+find|search\s+for|looking\s+for|find|buy|get|order|purchase)\b\s*"
)
_DETERMINER = regex.compile(
    r"^(?:(?:a|an|the|some|one|(?:a\s+)?(?:pair|pack|set|bottle|box|bag|couple)\s+of)\s+)+"
)
_RELATIVE = regex.compile(
    r"\s*\b(?:with|which|that|who|where|for|made\s+(?:of|from|with)|having|featuring|including)\b\s*"
)
_SPLIT = regex.compile(
    r"\s*(?:[,;]|\b(?:with|which|that|who|where|for|made\s+(?:of|from|with)|having|featuring|including|and|"
    r"but|also|plus)\b)\s*"
)
_HEAD_SPLIT = regex.compile(r"\s*(?:[,;]|\band\b)\s*")
_LEAD_FILLER = regex.compile(r"^(?:(?:is|are|be|it\s+is|it's|they\s+are|has|have|to\s+be|also|very|should\s+be)\s+)+")
_PHRASE = regex.compile(r"^[a-z0-9][a-z0-9'&./()\- ]*$")
_WS = regex.compile(r"\s+")
_MAX_WORDS = 8
_MAX_PHRASE_CHARS = 80


def goal_text(instruction: str) -> str:
    """The goal sentence, lower-cased: from a bare goal or a WebShop text page ('Instruction: [SEP] ...')."""
    text = instruction[:MAX_CHARS].lower()
    if "instruction:" in text:
        text = text.split("instruction:", 1)[1]
        text = text.lstrip(" [sep]")
        text = text.split("[sep]", 1)[0]
    return _WS.sub(" ", text, timeout=_T).strip(" .!?\"'")


def _phrase(piece: str) -> str:
    piece = _LEAD_FILLER.sub("", piece.strip(" .!?\"'-"), timeout=_T)
    piece = _DETERMINER.sub("", piece, timeout=_T).strip(" .!?\"'-")
    if not piece or len(piece) > _MAX_PHRASE_CHARS or len(piece.split()) > _MAX_WORDS \
            or not _PHRASE.match(piece, timeout=_T):
        return ""
    return piece


def _peel_features(product: str) -> tuple[str, list[str]]:
    """Move known leading feature phrases ('machine wash', 'gluten free') out of the product phrase."""
    features: list[str] = []
    changed = True
    while changed:
        changed = False
        for feature in FEATURE_PHRASES:
            if product.startswith(feature + " "):
                features.append(feature)
                product = product[len(feature) + 1:].strip()
                changed = True
                break
    return product, features


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


def _bind(text: str) -> WebShopBinding:
    price_upper: float | None = None
    price = _PRICE.search(text, timeout=_T)
    if price:
        price_upper = float(price.group(1))
        text = text[:price.start()] + text[price.end():]

    options: dict[str, str] = {}

    def take(key: str, pattern: regex.Pattern[str], group: int = 1, gap: str = " , ") -> None:
        nonlocal text
        while m := pattern.search(text, timeout=_T):
            k = key or ("color" if m.group(1) == "colour" else m.group(1))
            value = _phrase(m.group(group))
            if value and k not in options:
                options[k] = value
            text = text[:m.start()] + gap + text[m.end():]

    take("", _OPTION, 2)
    take("color", _IN_COLOR)
    take("color", _COLOR_OF)
    take("size", _IN_SIZE)
    take("size", _SIZE_IN)
    take("size", _SIZE_BARE)
    take("quantity", _QUANTITY, gap=" ")  # "a 3 pack of X": X stays the product

    text = _REQUEST.sub("", text.strip(" ,;"), timeout=_T)
    relative = _RELATIVE.search(text, timeout=_T)
    head, tail = (text[:relative.start()], text[relative.start():]) if relative else (text, "")
    head_pieces = [_phrase(p) for p in _HEAD_SPLIT.split(head, timeout=_T)]
    head_pieces = [p for p in head_pieces if p]
    attributes = head_pieces[:-1]
    product = head_pieces[-1] if head_pieces else ""
    product, features = _peel_features(product)
    attributes += features
    attributes += [_phrase(p) for p in _SPLIT.split(tail, timeout=_T)]
    return WebShopBinding(product_type=product, attributes=_dedupe(attributes), options=options,
                          price_upper=price_upper)


def bind_task(instruction: str) -> WebShopBinding:
    """Parse a WebShop goal (or a text page holding it) into its binding; never raises on text."""
    try:
        return _bind(goal_text(instruction))
    except TimeoutError:  # pathological text: report nothing rather than a partial guess
        return WebShopBinding()
