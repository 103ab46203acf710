"""Generate and check the offline AppWorld data root (run with AppWorld's own venv python).

    .venvs/appworld/bin/python adapters/appworld/generate.py --root .venvs/appworld-data [--jobs 2]

Uses only the installed ``appworld`` package's own code (API docs built from its app
source, its model classes, ``Task.save``, ``AppWorld.execute`` and its evaluator). The
output is licence-protected material (API docs, app databases): it is generated here and
never committed. Steps:

1. build AppWorld's API docs and one world (``tasks/world.py``), saved once; every variant's task
   folder links to those databases and has its own ``supervisor.db`` (its instruction) and
   ground truth (``tasks/ground_truth.py``);
2. run every variant's good and wrong solution (``tasks/scenarios.py``) in AppWorld and evaluate
   them with AppWorld's evaluator, in ``--jobs`` worker processes; a variant whose good
   solution fails or whose wrong one passes is refused (left out of the index);
3. write ``rubricgym_index.json`` (the accepted variants with split, apps and operations)
   and ``rubricgym_setup_report.json`` (timings, refusals). Solutions stay in the committed
   code, outside the data root the server reads.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import sqlite3
import sys
import time

# The scenario code, imported as top-level modules: its package (``tasks/__init__.py``)
# needs rubricgym, which AppWorld's venv does not have.
TASKS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tasks")

TASK_DATETIME = (2023, 5, 18, 12, 0, 0)
BUILD_DATETIME = (2023, 5, 1, 9, 0, 0)  # "now" while the world is being built
DATASET = "rubricgym_offline"
WORLD_TASK = "world_0"  # holds the databases every variant links to (not a task agents see)
clock = time.perf_counter  # freezegun patches module-level references while frozen


def evaluation_code(checks: list[tuple[str, str, str]], canary: str) -> str:
    lines = [
        f"# Canary String: {canary}",
        "import json",
        "",
        "from appworld.common.utils import list_of, set_of",
        "",
        "",
        "def _predicted_answer(models):",
        "    task = models.end.supervisor.Task.all()[0]",
        "    try:",
        "        return json.loads(task.answer)",
        "    except json.JSONDecodeError:",
        "        return task.answer",
        "",
        "",
        "def evaluate(test, public_data, private_data, main_user, models, ground_truth_answer):",
        '    with test("assert answers match."):',
        "        test.answer(_predicted_answer(models), ground_truth_answer)",
    ]
    for requirement, _, code in checks:
        lines.append(f"    with test({requirement!r}):")
        lines.extend("        " + line for line in code.splitlines())
    return "\n".join(lines) + "\n"


def write_ground_truth(root: str, variant: dict, gt: dict, canary: str) -> None:
    from appworld.common.utils import write_file, write_json  # AppWorld's venv only

    d = os.path.join(root, "data", "tasks", variant["id"], "ground_truth")
    os.makedirs(d, exist_ok=True)
    write_json({"difficulty": 1, "mode": "minimal", "num_apps": len(variant["apps"]), "num_apis": 0,
                "num_solution_code_lines": sum(len(c.splitlines()) for c in variant["good"])},
               f"{d}/metadata.json", silent=True)
    write_json({}, f"{d}/public_data.json", silent=True)
    write_json(gt["private"], f"{d}/private_data.json", silent=True)
    write_file(json.dumps(gt["answer"]), f"{d}/answer.json")
    tests = [{"requirement": "assert answers match.", "label": "no_op_fail"}]
    tests += [{"requirement": r, "label": label} for r, label, _ in gt["tests"]]
    write_json(tests, f"{d}/test_data.json", silent=True)
    write_file(evaluation_code(gt["tests"], canary), f"{d}/evaluation.py")


def build(root: str) -> tuple[list[dict], dict]:
    """API docs, the world, and every variant's task folder; returns the variants and timings."""
    from appworld.apps import get_all_apps  # AppWorld's venv only
    from appworld.apps.admin.models import MainUserMunch  # AppWorld's venv only
    from appworld.apps.api_lib import set_local_date_and_time, unset_local_date_and_time  # AppWorld's venv only
    from appworld.collections.api_docs import ApiDocCollection  # AppWorld's venv only
    from appworld.collections.models import ModelCollection  # AppWorld's venv only
    from appworld.common.constants import CANARY_STRING, DB_VERSION  # AppWorld's venv only
    from appworld.common.datetime import DateTime  # AppWorld's venv only
    from appworld.common.utils import write_json  # AppWorld's venv only
    from appworld.task import Task  # AppWorld's venv only

    if TASKS_DIR not in sys.path:
        sys.path.insert(0, TASKS_DIR)
    import ground_truth as GT  # AppWorld's venv only
    import scenarios as SC  # AppWorld's venv only
    import world as W  # AppWorld's venv only

    timings = {}
    t0 = clock()
    variants = [v.as_dict() for v in SC.build_variants()]
    apps = get_all_apps(skip_admin=True)
    shutil.rmtree(os.path.join(root, "data"), ignore_errors=True)
    shutil.rmtree(os.path.join(root, "experiments"), ignore_errors=True)
    os.makedirs(os.path.join(root, "data", "api_docs", "standard"), exist_ok=True)
    # ApiDocCollection.save() also writes "openapi", which needs an absent package: write "standard" ourselves.
    docs = ApiDocCollection.build(load_apps=tuple(apps), include_response_schemas=True)
    for app in apps:
        standard = {api: dict(doc) | {"canary_string": CANARY_STRING} for api, doc in docs[app].items()}
        write_json(standard, os.path.join(root, "data", "api_docs", "standard", app + ".json"), silent=True)
    doc_rows = [(app, api, doc) for app in apps for api, doc in docs[app].items()]
    timings["api_docs_s"] = round(clock() - t0, 1)

    t1 = clock()
    freezer = set_local_date_and_time(DateTime(*BUILD_DATETIME))
    mc = ModelCollection.load(to_db_home_path=":memory:rubricgym", from_db_home_path=":memory:rubricgym",
                              load_apps=get_all_apps(), create_db=True)
    mc.api_docs.ApiDoc.save_all([
        mc.api_docs.ApiDoc.create(app_name_=a, api_name=n, path=d["path"], method=d["method"],
                                  description=d["description"], parameters=d["parameters"],
                                  response_schemas=d["response_schemas"]) for a, n, d in doc_rows])
    ids = W.build_world(mc, "(world template)", DateTime)
    unset_local_date_and_time(freezer)
    task = Task(id=WORLD_TASK, instruction="(world template)", supervisor=MainUserMunch(**W.SUPERVISOR),
                datetime=DateTime(*TASK_DATETIME), allowed_apps=apps, db_version=DB_VERSION, model_collection=mc)
    task.save(delete_if_exists=True, save_ground_truth=False, model_collection_format="full")
    mc.close()
    timings["world_s"] = round(clock() - t1, 1)

    t2 = clock()
    world_dir = os.path.join(root, "data", "tasks", WORLD_TASK)
    with open(os.path.join(world_dir, "specs.json"), encoding="utf-8") as fh:
        world_specs = json.load(fh)
    for variant in variants:
        dbs = os.path.join(root, "data", "tasks", variant["id"], "dbs")
        os.makedirs(dbs)
        for name in os.listdir(os.path.join(world_dir, "dbs")):
            source = os.path.join(world_dir, "dbs", name)
            if name == "supervisor.db":
                shutil.copyfile(source, os.path.join(dbs, name))
            else:  # read-only at run time: AppWorld loads them into memory
                os.symlink(os.path.join("..", "..", WORLD_TASK, "dbs", name), os.path.join(dbs, name))
        with sqlite3.connect(os.path.join(dbs, "supervisor.db")) as db:
            if db.execute("UPDATE tasks SET instruction = ?", (variant["instruction"],)).rowcount != 1:
                raise RuntimeError("expected exactly one supervisor task row")
        with open(os.path.join(root, "data", "tasks", variant["id"], "specs.json"), "w", encoding="utf-8") as fh:
            json.dump(world_specs | {"instruction": variant["instruction"]}, fh, indent=4)
        write_ground_truth(root, variant, GT.ground_truth(variant["check"], ids), CANARY_STRING)
    timings["tasks_s"] = round(clock() - t2, 1)
    return variants, timings


def _run(task_id: str, cells: list[str], experiment: str) -> tuple[bool, str]:
    from appworld import AppWorld  # AppWorld's venv only

    with AppWorld(task_id=task_id, experiment_name=experiment, timeout_seconds=30) as world:
        output = ""
        for cell in cells:
            output = world.execute(cell)
            if world.task_completed():
                break
        result = world.evaluate(suppress_errors=True)
        passed = bool(result.success)
    return passed, output[-300:]


def check_variant(args: tuple[str, dict]) -> dict:
    """Good must pass AppWorld's evaluator, wrong must fail; runs in a worker process."""
    root, variant = args
    os.environ["APPWORLD_ROOT"] = root
    from appworld import update_root  # AppWorld's venv only

    update_root(root)
    experiment = f"rubricgym_setup_{os.getpid()}"
    report = {"id": variant["id"]}
    try:
        report["good"], report["good_tail"] = _run(variant["id"], variant["good"], experiment)
        report["bad"], report["bad_tail"] = _run(variant["id"], variant["bad"], experiment)
    except Exception as exc:  # a variant that cannot even run is refused, with the reason
        report["error"] = f"{type(exc).__name__}: {exc}"[:500]
        report["good"], report["bad"] = False, None
    report["accepted"] = report["good"] is True and report["bad"] is False
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="data root to (re)generate")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="worker processes that check variants (default: 2)")
    parser.add_argument("--limit", type=int, default=0, help="check only the first N variants (debugging)")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    os.environ["APPWORLD_ROOT"] = root
    t0 = clock()
    from appworld import update_root  # AppWorld's venv only

    update_root(root)
    variants, timings = build(root)
    if args.limit:
        variants = variants[: args.limit]

    t1 = clock()
    work = [(root, v) for v in variants]
    if args.jobs > 1:
        with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
            reports = pool.map(check_variant, work, chunksize=4)
    else:
        reports = [check_variant(w) for w in work]
    timings["check_s"] = round(clock() - t1, 1)
    shutil.rmtree(os.path.join(root, "experiments"), ignore_errors=True)

    accepted = {r["id"] for r in reports if r["accepted"]}
    refused = [r for r in reports if not r["accepted"]]
    kept = [v for v in variants if v["id"] in accepted]
    for v in variants:
        if v["id"] not in accepted:
            shutil.rmtree(os.path.join(root, "data", "tasks", v["id"]), ignore_errors=True)
    os.makedirs(os.path.join(root, "data", "datasets"), exist_ok=True)
    with open(os.path.join(root, "data", "datasets", DATASET + ".txt"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(v["id"] for v in kept) + "\n")
    index = {
        "dataset": DATASET,
        "appworld_version": __import__("appworld").__version__,
        "tasks": [{k: v[k] for k in ("id", "scenario", "split", "instruction", "apps", "operations")} for v in kept],
    }
    with open(os.path.join(root, "rubricgym_index.json"), "w", encoding="utf-8") as fh:
        json.dump(index, fh, indent=1, sort_keys=True)
    timings["total_s"] = round(clock() - t0, 1)
    report = {"variants": len(variants), "accepted": len(kept), "jobs": args.jobs, "timings": timings,
              "scenarios": len({v["scenario"] for v in kept}), "refused": refused}
    with open(os.path.join(root, "rubricgym_setup_report.json"), "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=1)
    print(f"generated {len(kept)}/{len(variants)} AppWorld variants ({report['scenarios']} scenarios) into {root} "
          f"in {timings['total_s']:.0f} s with {args.jobs} jobs: {timings}; refused {len(refused)}")
    for r in refused:
        print(f"  refused {r['id']}: good={r['good']} bad={r['bad']} {r.get('error', '')} "
              f"{(r.get('good_tail') or '')[-160:]!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
