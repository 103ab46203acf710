"""Writes the bundled SearchQA set: a small fictional world (towns, people, companies,
books), four passages per entity, and single- and two-hop questions with gold answers,
supporting passages, distractors and one oracle query per hop. Deterministic for a seed.

    python -m rubricgym.adapters.searchqa.generate [--out DIR] [--seed 13]

The world is invented (syllable names) so no model has memorised its answers. Questions
are kept only when they pass the checks the tests repeat: each oracle query ranks its
supporting passage in the BM25 top 3, every question has >= 3 distractors that name its
entity without containing the answer, and a two-hop question's second supporting passage
is not in the BM25 top 5 for the question text alone.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from rubricgym.adapters.searchqa.answers import normalize_answer
from rubricgym.adapters.searchqa.data import BUNDLED_DIR, Passage
from rubricgym.adapters.searchqa.engine import BM25Retriever

ORACLE_K = 3   # the env's default topk: the oracle's query must bring its passage this high
HOP2_K = 5     # a two-hop question alone must not bring its second passage this high
SINGLE, TWO_HOP = 90, 60
EVAL_SHARE = 0.25

SYLLABLES = ("ka", "lo", "mer", "vin", "tor", "sal", "bre", "dun", "el", "fa", "gor", "hal", "ist", "jor",
             "kel", "lin", "mor", "nav", "ost", "pel", "quin", "ras", "sev", "tam", "ul", "vor", "wen", "yar",
             "zel", "cor", "dra", "fen")
TOWN_ENDS = ("ford", "holm", "wick", "stead", "mere", "by", "vale", "gate")
SURNAME_ENDS = ("ner", "ley", "win", "ard", "ott", "ers")
OCCUPATIONS = ("painter", "engineer", "novelist", "composer", "botanist", "architect", "cartographer", "sculptor")
INDUSTRIES = (("Instruments", "precision instruments"), ("Mills", "textile"), ("Shipping", "shipping"),
              ("Foods", "food processing"), ("Optics", "optics"), ("Ceramics", "ceramics"),
              ("Press", "publishing"), ("Motors", "engine manufacturing"))
ADJECTIVES = ("Silent", "Hollow", "Amber", "Distant", "Winter", "Crimson", "Quiet", "Broken", "Golden", "Pale",
              "Endless", "Hidden")
NOUNS = ("Harbor", "Orchard", "Lantern", "Meadow", "Cathedral", "Compass", "Garden", "Archive", "Bridge",
         "Tide", "Mirror", "Frontier")
FESTIVALS = ("lantern festival", "harvest fair", "rowing regatta", "folk music week", "cheese market", "kite day")
AWARDS = ("Orsel Prize", "Vantry Medal", "Kessin Award", "Lumen Prize")


@dataclass
class World:
    rng: random.Random
    used: set[str] = field(default_factory=set)

    def word(self, n: int, end: tuple[str, ...] = ()) -> str:
        for _ in range(1000):
            w = "".join(self.rng.choice(SYLLABLES) for _ in range(n)) + (self.rng.choice(end) if end else "")
            w = w.capitalize()
            # no name inside another: "Kalo" would match inside "Kalomer"
            if 4 <= len(w) <= 12 and not any(w.lower() in u or u in w.lower() for u in self.used):
                self.used.add(w.lower())
                return w
        raise RuntimeError("name space exhausted; change the seed")


def build_world(seed: int) -> tuple[list[Passage], dict[str, dict], dict[str, list[str]]]:
    """Passages, entity records (by name) and each entity's passage ids (by name, in order)."""
    w = World(random.Random(seed))
    regions = [f"{w.word(2)} Province" for _ in range(6)]
    rivers = [f"{w.word(2)} River" for _ in range(12)]
    towns = {}
    for _ in range(40):
        name = w.word(2, TOWN_ENDS)
        towns[name] = dict(kind="town", name=name, region=w.rng.choice(regions), river=w.rng.choice(rivers),
                           founded=w.rng.randint(1150, 1890), population=w.rng.randint(2, 95) * 1000 + w.rng.randint(1, 9) * 100,
                           festival=w.rng.choice(FESTIVALS))
    town_names = list(towns)
    people = {}
    for _ in range(60):
        name = f"{w.word(2)} {w.word(1, SURNAME_ENDS)}"
        born, work, home = w.rng.sample(town_names, 3)
        year = w.rng.randint(1890, 1960)
        people[name] = dict(kind="person", name=name, born=year, birthplace=born, work_town=work, home_town=home,
                            occupation=w.rng.choice(OCCUPATIONS), award=w.rng.choice(AWARDS),
                            award_year=year + w.rng.randint(25, 40))
    person_names = list(people)
    companies = {}
    for _ in range(30):
        suffix, industry = w.rng.choice(INDUSTRIES)
        name = f"{w.word(2)} {suffix}"
        founder = w.rng.choice(person_names)
        hq = w.rng.choice([t for t in town_names if t not in (people[founder]["birthplace"],)])
        companies[name] = dict(kind="company", name=name, industry=industry, founder=founder, hq=hq,
                               founded=people[founder]["born"] + w.rng.randint(24, 45),
                               employees=w.rng.randint(3, 90) * 10, partner=w.rng.choice(town_names))
    books = {}
    titles = [f"The {a} {n}" for a in ADJECTIVES for n in NOUNS]
    w.rng.shuffle(titles)
    for title in titles[:30]:
        author = w.rng.choice(person_names)
        books[title] = dict(kind="book", name=title, author=author, year=people[author]["born"] + w.rng.randint(22, 50),
                            setting=w.rng.choice(town_names), genre=w.rng.choice(("novel", "memoir", "novella")))

    texts: dict[str, list[str]] = {}
    for t in towns.values():
        texts[t["name"]] = [
            f"{t['name']} is a market town in {t['region']}. It lies on the {t['river']}, whose bridges carry the old trade road.",
            f"{t['name']} was founded in {t['founded']} around a ferry crossing and received its charter soon after.",
            f"According to the last census, {t['name']} has a population of {t['population']:,} residents.",
            f"Every summer {t['name']} hosts a {t['festival']} that draws visitors from across {t['region']}.",
        ]
    for p in people.values():
        texts[p["name"]] = [
            f"{p['name']} (born {p['born']}) is a {p['occupation']} who was born in {p['birthplace']}.",
            f"{p['name']} spent most of a working life in {p['work_town']}, where a studio and a workshop were kept.",
            f"In {p['award_year']}, {p['name']} received the {p['award']} for a lifetime of work.",
            f"{p['name']} later settled in {p['home_town']} and taught apprentices there for many years.",
        ]
    for c in companies.values():
        texts[c["name"]] = [
            f"{c['name']} is a {c['industry']} company founded in {c['founded']} by {c['founder']}.",
            f"{c['name']} is headquartered in {c['hq']}, where it employs about {c['employees']} people.",
            f"{c['name']} opened a second workshop in {c['partner']} to serve customers in the region.",
            f"Products of {c['name']} were shown at several trade exhibitions and won praise for their finish.",
        ]
    for b in books.values():
        texts[b["name"]] = [
            f"{b['name']} is a {b['genre']} written by {b['author']} and first published in {b['year']}.",
            f"{b['name']} is set in {b['setting']} and follows a family across three generations.",
            f"Critics praised {b['name']} for its patient pacing and its portrait of small-town life.",
            f"{b['name']} was adapted for the stage and translated into several languages.",
        ]
    passages: list[Passage] = []
    ids: dict[str, list[str]] = {}
    entities = {**towns, **people, **companies, **books}
    for n, name in enumerate(entities):
        ids[name] = []
        for k, text in enumerate(texts[name]):
            pid = f"sq{n:03d}-{k}"
            passages.append(Passage(id=pid, title=name, text=text))
            ids[name].append(pid)
    return passages, entities, ids


def candidate_questions(entities: dict[str, dict], ids: dict[str, list[str]]) -> tuple[list[dict], list[dict]]:
    """Every question the templates can ask: (single-hop, two-hop), each with its hops."""
    single, double = [], []

    def q(question, golds, hops, entity):
        return dict(question=question, golden_answers=golds, hops=len(hops), entity=entity,
                    supporting_ids=[ids[e][i] for e, i, _ in hops], oracle_queries=[query for _, _, query in hops])

    for e in entities.values():
        n = e["name"]
        if e["kind"] == "person":
            single.append(q(f"In what year was {n} born?", [str(e["born"])], [(n, 0, f"{n} born year")], n))
            single.append(q(f"Where was {n} born?", [e["birthplace"]], [(n, 0, f"{n} birthplace born in")], n))
            town = entities[e["birthplace"]]
            double.append(q(f"Which river flows through the birthplace of {n}?",
                            [town["river"], town["river"].removesuffix(" River")],
                            [(n, 0, f"{n} born in"), (town["name"], 0, f"{town['name']} lies on river")], n))
        elif e["kind"] == "town":
            single.append(q(f"Which river flows through {n}?", [e["river"], e["river"].removesuffix(" River")],
                            [(n, 0, f"{n} lies on river")], n))
            single.append(q(f"How many people live in {n}?", [f"{e['population']:,}", str(e["population"])],
                            [(n, 2, f"{n} population census")], n))
            single.append(q(f"When was {n} founded?", [str(e["founded"])], [(n, 1, f"{n} founded")], n))
        elif e["kind"] == "company":
            founder, hq = entities[e["founder"]], entities[e["hq"]]
            single.append(q(f"Who founded {n}?", [founder["name"]], [(n, 0, f"{n} founded by founder")], n))
            single.append(q(f"Where is {n} headquartered?", [hq["name"]], [(n, 1, f"{n} headquartered in")], n))
            double.append(q(f"In what year was the founder of {n} born?", [str(founder["born"])],
                            [(n, 0, f"{n} founded by founder"), (founder["name"], 0, f"{founder['name']} born year")], n))
            double.append(q(f"How many people live in the town where {n} is headquartered?",
                            [f"{hq['population']:,}", str(hq["population"])],
                            [(n, 1, f"{n} headquartered in"), (hq["name"], 2, f"{hq['name']} population census")], n))
        else:
            author = entities[e["author"]]
            single.append(q(f'Who wrote "{n}"?', [author["name"]], [(n, 0, f"{n} written by")], n))
            single.append(q(f'In what year was "{n}" first published?', [str(e["year"])], [(n, 0, f"{n} first published")], n))
            double.append(q(f'Where was the author of "{n}" born?', [author["birthplace"]],
                            [(n, 0, f"{n} written by"), (author["name"], 0, f"{author['name']} born in")], n))
            double.append(q(f'In what year was the author of "{n}" born?', [str(author["born"])],
                            [(n, 0, f"{n} written by"), (author["name"], 0, f"{author['name']} born year")], n))
    return single, double


def _contains(text: str, answer: str) -> bool:
    return f" {normalize_answer(answer)} " in f" {normalize_answer(text)} "


def keep(question: dict, passages: dict[str, Passage], index: BM25Retriever) -> dict | None:
    """The question with its distractors, or None when it fails a check."""
    for pid, query in zip(question["supporting_ids"], question["oracle_queries"]):
        if pid not in [h.passage.id for h in index.search(query, ORACLE_K)]:
            return None
    if question["hops"] == 2:
        top = [h.passage.id for h in index.search(question["question"], HOP2_K)]
        if question["supporting_ids"][1] in top:
            return None
    entity = question["entity"]
    distractors = [p.id for p in passages.values()
                   if p.id not in question["supporting_ids"] and entity in f"{p.title} {p.text}"
                   and not any(_contains(p.text, g) for g in question["golden_answers"])]
    if len(distractors) < 3:
        return None
    return {**question, "distractor_ids": distractors[:6]}


def generate(seed: int = 13) -> tuple[list[Passage], list[dict], list[dict]]:
    passages, entities, ids = build_world(seed)
    by_id = {p.id: p for p in passages}
    index = BM25Retriever(passages)
    single, double = candidate_questions(entities, ids)
    rng = random.Random(seed + 1)
    rng.shuffle(single)
    rng.shuffle(double)
    chosen: list[dict] = []
    for pool, want in ((single, SINGLE), (double, TWO_HOP)):
        kept = [k for k in (keep(q, by_id, index) for q in pool) if k is not None]
        if len(kept) < want:
            raise RuntimeError(f"only {len(kept)} questions pass the checks, {want} wanted")
        chosen.extend(kept[:want])
    rng.shuffle(chosen)
    questions = []
    for n, qq in enumerate(chosen):
        qq = {k: v for k, v in qq.items() if k != "entity"}
        questions.append({"id": f"sq-{n:03d}", "data_source": "searchqa-bundled", **qq})
    n_eval = round(len(questions) * EVAL_SHARE)
    return passages, questions[n_eval:], questions[:n_eval]


def _write(path: Path, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="write the bundled SearchQA corpus and questions")
    parser.add_argument("--out", default=str(BUNDLED_DIR))
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    passages, train, evaluation = generate(args.seed)
    _write(out / "corpus.jsonl", [{"id": p.id, "contents": p.contents} for p in passages])
    _write(out / "train.jsonl", train)
    _write(out / "eval.jsonl", evaluation)
    print(f"{len(passages)} passages, {len(train)} train and {len(evaluation)} eval questions -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
