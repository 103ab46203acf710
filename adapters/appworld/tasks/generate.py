"""Generate the offline AppWorld data root (run with AppWorld's own venv python).

    .venvs/appworld/bin/python adapters/appworld/tasks/generate.py --root .venvs/appworld-data

Uses only the installed ``appworld`` package's own code (API docs built from its app
source, its model classes, ``Task.save``). The output is licence-protected material
(API docs, app databases): it is generated here and never committed. Besides AppWorld's
own layout it writes ``rubricgym_index.json``: the task list and an API index
(app -> api -> HTTP method, parameter names) that the adapter uses for its facts.
Solutions stay in the committed catalog, outside the data root the server reads.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

TASK_DATETIME = (2023, 5, 18, 12, 0, 0)
BUILD_DATETIME = (2023, 5, 1, 9, 0, 0)  # "now" while the world is being built
DATASET = "rubricgym_offline"


def load_catalog() -> list[dict]:
    import yaml

    with open(os.path.join(HERE, "catalog.yaml"), encoding="utf-8") as fh:
        tasks = yaml.safe_load(fh)["tasks"]
    for task in tasks:
        if task["id"].count("_") != 1:
            raise ValueError(f"task id {task['id']!r} must have exactly one underscore (AppWorld's format)")
    return tasks


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


def write_ground_truth(root: str, spec: dict, gt: dict, canary: str) -> None:
    from appworld.common.utils import write_file, write_json

    d = os.path.join(root, "data", "tasks", spec["id"], "ground_truth")
    os.makedirs(d, exist_ok=True)
    apis_used = {m for cell in spec["good"] for m in re.findall(r"apis\.(\w+\.\w+)", cell)}
    write_json({"difficulty": 1, "mode": "minimal", "num_apps": len(spec["apps"]), "num_apis": len(apis_used),
                "num_solution_code_lines": sum(len(c.splitlines()) for c in spec["good"])},
               f"{d}/metadata.json", silent=True)
    write_json({}, f"{d}/public_data.json", silent=True)
    write_json(gt["private"], f"{d}/private_data.json", silent=True)
    write_file(json.dumps(gt["answer"]), f"{d}/answer.json")
    tests = [{"requirement": "assert answers match.", "label": "no_op_fail"}]
    tests += [{"requirement": r, "label": label} for r, label, _ in gt["tests"]]
    write_json(tests, f"{d}/test_data.json", silent=True)
    write_file(evaluation_code(gt["tests"], canary), f"{d}/evaluation.py")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="data root to (re)generate")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    os.environ["APPWORLD_ROOT"] = root
    clock = time.perf_counter  # freezegun patches module-level references while frozen
    t0 = clock()

    from appworld.apps import get_all_apps
    from appworld.apps.admin.models import MainUserMunch
    from appworld.apps.api_lib import set_local_date_and_time, unset_local_date_and_time
    from appworld.collections.api_docs import ApiDocCollection
    from appworld.collections.models import ModelCollection
    from appworld.common.constants import CANARY_STRING, DB_VERSION
    from appworld.common.datetime import DateTime
    from appworld.common.utils import write_file, write_json
    from appworld.task import Task

    import ground_truth as GT
    import world as W

    catalog = load_catalog()
    apps = get_all_apps(skip_admin=True)
    shutil.rmtree(os.path.join(root, "data"), ignore_errors=True)
    os.makedirs(os.path.join(root, "data", "api_docs", "standard"), exist_ok=True)
    # ApiDocCollection.save() also writes "openapi", which needs an absent package: write "standard" ourselves.
    docs = ApiDocCollection.build(load_apps=tuple(apps), include_response_schemas=True)
    api_index: dict[str, dict[str, dict]] = {}
    for app in apps:
        standard = {api: dict(doc) | {"canary_string": CANARY_STRING} for api, doc in docs[app].items()}
        write_json(standard, os.path.join(root, "data", "api_docs", "standard", app + ".json"), silent=True)
        api_index[app] = {api: {"method": doc["method"].upper(), "parameters": [p["name"] for p in doc["parameters"]]}
                          for api, doc in docs[app].items()}
    doc_rows = [(app, api, doc) for app in apps for api, doc in docs[app].items()]

    # The world is built once (in memory, then saved for the first task); every other task
    # gets a copy of those databases with its own instruction in supervisor.tasks.
    freezer = set_local_date_and_time(DateTime(*BUILD_DATETIME))
    mc = ModelCollection.load(to_db_home_path=":memory:rubricgym", from_db_home_path=":memory:rubricgym",
                              load_apps=get_all_apps(), create_db=True)
    mc.api_docs.ApiDoc.save_all([
        mc.api_docs.ApiDoc.create(app_name_=a, api_name=n, path=d["path"], method=d["method"],
                                  description=d["description"], parameters=d["parameters"],
                                  response_schemas=d["response_schemas"]) for a, n, d in doc_rows])
    first = catalog[0]
    truths = GT.ground_truth(W.build_world(mc, first["instruction"], DateTime))
    mismatch = {t["id"] for t in catalog} ^ set(truths)
    if mismatch:
        raise ValueError(f"catalog.yaml and ground_truth.py disagree on tasks: {sorted(mismatch)}")
    unset_local_date_and_time(freezer)
    task = Task(id=first["id"], instruction=first["instruction"], supervisor=MainUserMunch(**W.SUPERVISOR),
                datetime=DateTime(*TASK_DATETIME), allowed_apps=apps, db_version=DB_VERSION, model_collection=mc)
    task.save(delete_if_exists=True, save_ground_truth=False, model_collection_format="full")
    mc.close()
    first_dir = os.path.join(root, "data", "tasks", first["id"])
    with open(os.path.join(first_dir, "specs.json"), encoding="utf-8") as fh:
        first_specs = json.load(fh)
    for spec in catalog:
        task_dir = os.path.join(root, "data", "tasks", spec["id"])
        if spec is not first:
            shutil.copytree(os.path.join(first_dir, "dbs"), os.path.join(task_dir, "dbs"))
            with sqlite3.connect(os.path.join(task_dir, "dbs", "supervisor.db")) as db:
                if db.execute("UPDATE tasks SET instruction = ?", (spec["instruction"],)).rowcount != 1:
                    raise RuntimeError("expected exactly one supervisor task row")
            with open(os.path.join(task_dir, "specs.json"), "w", encoding="utf-8") as fh:
                json.dump(first_specs | {"instruction": spec["instruction"]}, fh, indent=4)
        write_ground_truth(root, spec, truths[spec["id"]], CANARY_STRING)

    os.makedirs(os.path.join(root, "data", "datasets"), exist_ok=True)
    write_file("\n".join(t["id"] for t in catalog) + "\n", os.path.join(root, "data", "datasets", DATASET + ".txt"))
    index = {
        "dataset": DATASET,
        "appworld_version": __import__("appworld").__version__,
        "tasks": [{"id": t["id"], "instruction": t["instruction"], "apps": t["apps"],
                   "operations": t.get("operations", [])} for t in catalog],
        "apis": api_index,
    }
    with open(os.path.join(root, "rubricgym_index.json"), "w", encoding="utf-8") as fh:
        json.dump(index, fh, indent=1, sort_keys=True)
    print(f"generated {len(catalog)} AppWorld tasks into {root} in {clock() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
