"""How the trainer runs over processes: one ``ParallelStrategy`` object, chosen once.

``choose.choose_strategy`` reads the run config and the launcher's variables (``plan.py``), starts
the process group (``ranks.py``) and returns the replicated strategy (``base.py``), FSDP
(``fsdp.py``) or DeepSpeed ZeRO (``zero.py``). Nothing outside this package names an engine
or branches on which one runs (tests/trainer/test_parallel_boundary.py checks it).
"""
