"""Corpus and question files: the Search-R1 formats, read into typed records.

* corpus: JSON lines ``{"id", "contents"}`` with ``contents = '"Title"\\ntext'`` (or
  ``{"id", "title", "text"}``);
* questions: JSON lines or Parquet with ``question`` and ``golden_answers`` (NQ/HotpotQA
  files of Search-R1; ``answer``/``answers`` are accepted too), optional ``id`` and
  ``data_source``. Parquet needs pyarrow (``pip install 'rubricgym[searchqa]'``).

Bad lines raise ``DataFormatError`` naming the file and line: a data set is either read
whole or refused, never silently shortened.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from rubricgym.jsonl import JsonLinesError, iter_json_lines

BUNDLED_DIR = Path(__file__).parent / "data"
BUNDLED_CORPUS = BUNDLED_DIR / "corpus.jsonl"
BUNDLED_QUESTIONS = {"train": BUNDLED_DIR / "train.jsonl", "eval": BUNDLED_DIR / "eval.jsonl"}


class DataFormatError(ValueError):
    """A corpus or question file that does not have the expected shape."""


class Passage(BaseModel):
    id: str
    title: str = ""
    text: str

    @property
    def contents(self) -> str:
        """The Search-R1 ``contents`` field."""
        return f'"{self.title}"\n{self.text}' if self.title else self.text

    @classmethod
    def from_contents(cls, pid: str, contents: str) -> Passage:
        """Split ``'"Title"\\ntext'``; a contents without a title line is all text."""
        head, sep, rest = contents.partition("\n")
        if sep and len(head) >= 2 and head.startswith('"') and head.endswith('"'):
            return cls(id=pid, title=head[1:-1], text=rest.strip())
        return cls(id=pid, text=contents.strip())


class Question(BaseModel):
    id: str
    question: str
    golden_answers: list[str] = Field(min_length=1)
    data_source: str = ""
    hops: int = 0
    supporting_ids: list[str] = Field(default_factory=list, description="bundled set only")
    distractor_ids: list[str] = Field(default_factory=list, description="bundled set only")
    oracle_queries: list[str] = Field(default_factory=list, description="bundled set only: one query per hop")


def _json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, object)`` of a JSON-lines file; a bad line is a ``DataFormatError`` naming it."""
    try:
        for lineno, record in iter_json_lines(path, what="JSON", objects_only=False):
            if not isinstance(record, dict):
                raise DataFormatError(f"{path}:{lineno}: expected an object, got {type(record).__name__}")
            yield lineno, record
    except JsonLinesError as exc:
        raise DataFormatError(str(exc)) from exc


def load_corpus(path: str | Path) -> list[Passage]:
    """Every passage of a JSON-lines corpus, in file order; ids must be unique."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"SearchQA corpus {path} does not exist")
    passages: list[Passage] = []
    seen: set[str] = set()
    for lineno, rec in _json_lines(path):
        pid = str(rec.get("id", ""))
        if not pid:
            raise DataFormatError(f"{path}:{lineno}: passage without an 'id'")
        if pid in seen:
            raise DataFormatError(f"{path}:{lineno}: duplicate passage id {pid!r}")
        seen.add(pid)
        if isinstance(rec.get("contents"), str):
            passages.append(Passage.from_contents(pid, rec["contents"]))
        elif isinstance(rec.get("text"), str):
            passages.append(Passage(id=pid, title=str(rec.get("title") or ""), text=rec["text"]))
        else:
            raise DataFormatError(f"{path}:{lineno}: passage {pid!r} has neither 'contents' nor 'text'")
    if not passages:
        raise DataFormatError(f"{path}: the corpus is empty")
    return passages


def _as_question(record: dict[str, Any], index: int, where: str) -> Question:
    text = record.get("question")
    if not isinstance(text, str) or not text.strip():
        raise DataFormatError(f"{where}: no 'question' text")
    golds = next((record[k] for k in ("golden_answers", "answers", "answer") if record.get(k) is not None), None)
    if isinstance(golds, str):
        golds = [golds]
    elif golds is not None and not isinstance(golds, list):
        golds = list(golds)  # Parquet list columns arrive as arrays
    if not golds or not all(isinstance(g, str) for g in golds):
        raise DataFormatError(f"{where}: 'golden_answers' must be a non-empty list of strings")
    extra = {k: record[k] for k in ("hops", "supporting_ids", "distractor_ids", "oracle_queries") if k in record}
    for k in ("supporting_ids", "distractor_ids", "oracle_queries"):
        if k in extra:
            extra[k] = [str(x) for x in extra[k]]
    return Question(id=str(record.get("id") if record.get("id") is not None else index), question=text.strip(),
                    golden_answers=[str(g) for g in golds], data_source=str(record.get("data_source") or ""), **extra)


def load_questions(path: str | Path) -> list[Question]:
    """Questions from ``.jsonl``/``.json`` lines or ``.parquet``; ids must be unique."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"SearchQA question file {path} does not exist")
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq  # optional: only Parquet question files need it
        except ImportError as exc:
            raise ImportError("reading Parquet question files needs pyarrow: pip install 'rubricgym[searchqa]'") from exc
        try:
            rows = pq.read_table(path).to_pylist()
        except Exception as exc:  # pyarrow raises its own types for corrupt files
            raise DataFormatError(f"{path}: not a readable Parquet file: {exc}") from exc
        questions = [_as_question(r, i, f"{path} row {i}") for i, r in enumerate(rows)]
    else:
        questions = [_as_question(r, i, f"{path}:{lineno}") for i, (lineno, r) in enumerate(_json_lines(path))]
    if not questions:
        raise DataFormatError(f"{path}: no questions")
    ids = [q.id for q in questions]
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})[:5]
        raise DataFormatError(f"{path}: duplicate question ids {dupes}")
    return questions
