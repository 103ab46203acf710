"""``rubricgym`` with the tests' word env factories registered (``env.factory=word``,
``expert-word``, ``trca-word``): what a user's own launcher does for a factory of theirs
(docs/trainer.md). Run as a script, with tests/ on ``PYTHONPATH``."""

from __future__ import annotations

import sys

import trainer.word_env  # noqa: F401  (registers the word env factories)

from rubricgym.cli import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
