"""Sample-efficiency studies of advantage estimators (``rubricgym study``, docs/study.md).

``choice``: the small choice policy's study (runs, resumable); ``report``: its files;
``statistics``: bands over seeds, paired tests, areas; ``llm``: the same question with the LoRA
LLM trainer; ``cli``: the command.
"""
