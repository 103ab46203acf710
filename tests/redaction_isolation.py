"""An empty secret-redaction set for a block, the process's own restored after.

The set is process-wide by design (a key read once is hidden from then on), so without this a
key one test reads (``sk-rubricgym-...``) would hide text in a later test on the same worker."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rubricgym import secret_refs


@contextmanager
def own_registry() -> Iterator[None]:
    saved = secret_refs._forms, secret_refs._pieces, secret_refs._values
    secret_refs._forms, secret_refs._pieces, secret_refs._values = (), (), set()
    try:
        yield
    finally:
        secret_refs._forms, secret_refs._pieces, secret_refs._values = saved
