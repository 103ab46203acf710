"""The offline AppWorld task set: committed specs (catalog.yaml, ground_truth.py) and the
generator that turns them into an AppWorld data root at set-up (run in AppWorld's venv)."""
