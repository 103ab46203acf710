"""Benchmarks as plugins, end to end: an installed third-party package adds an env id through
the entry point; the core names no benchmark; the wheel imports with core dependencies only;
stored trajectories load typed in a fresh process; reward components combine."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import gymnasium as gym
import pytest
from requirements_guard import need

import rubricgym
from rubricgym.registration import BENCHMARKS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "lights_plugin"


# -- the core names no benchmark ----------------------------------------------------------------
def _strings_and_imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.lineno, node.module))
    return found


def test_core_and_trainer_name_no_benchmark():
    names = {n.lower() for n in BENCHMARKS} | {"alfworld", "appworld", "webshop", "searchqa", "tau_bench", "tau2",
                                                 "taubench", "textworld"}
    allowed = {(ROOT / "trainers" / "config.py", "ALFWorld-Rubric-v0")}  # the trainer's default env id
    offenders = []
    for folder in ("rubricgym", "trainers"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for lineno, text in _strings_and_imports(path):
                if (path, text) in allowed:
                    continue
                words = text.lower().replace("-", "_").replace(".", " ").replace("_", " ")
                squashed = text.lower().replace("-", "").replace("_", "")
                if any(n.replace("_", " ") in words or n.replace("_", "") in squashed for n in names):
                    # docstrings may use a benchmark as an *example*; code may not depend on one
                    if not _is_docstring(path, lineno):
                        offenders.append(f"{path.relative_to(ROOT)}:{lineno}: {text[:80]!r}")
    assert not offenders, "\n".join(offenders)


def _is_docstring(path: Path, lineno: int) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = node.body[0] if node.body else None
            if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and doc.lineno <= lineno <= doc.end_lineno:
                return True
    return False


# -- trajectories are self-describing -------------------------------------------------------------
def test_trajectory_file_loads_typed_in_a_fresh_process(tmp_path):
    need("alfworld")
    env = gym.make("ALFWorld-Rubric-v0")
    env.reset(seed=0)
    env.step("<think>look</think><action>look</action>")
    env.step("no tags at all")
    path = tmp_path / "t.jsonl"
    rubricgym.save_jsonl(path, [env.unwrapped.trajectory])
    env.close()
    code = ("import sys, rubricgym\nt = rubricgym.load_jsonl(sys.argv[1])[0]\n"
            "print(type(t.transitions[0].facts).__name__, sorted(t.transitions[0].info['rubric']),"
            " t.transitions[1].facts.parse_error, 'textworld' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert out.stdout.split() == ["ALFWorldFacts", "['trca']", "missing_tag", "False"], out.stderr


# -- rewards combine, every component observable ----------------------------------------------------
def test_trca_and_judge_combine_into_one_observable_record(tmp_path):
    need("alfworld")
    sys.path.insert(0, str(ROOT / "tests" / "judges"))
    from judge_test_servers import ScriptedJudgeServer

    from rubricgym.judges import JudgeRewardSpec, JudgeSettings
    from rubricgym.trca import TRCAConfig

    srv = ScriptedJudgeServer(mode="ok")
    try:
        settings = JudgeSettings(base_url=srv.base_url, model="scripted", api_key_env="NO_SUCH_KEY_VAR",
                                 response_format="json_object_schema", timeout_s=5.0)
        env = gym.make("ALFWorld-Rubric-v0", max_steps=3,
                       reward=[TRCAConfig(), (JudgeRewardSpec(settings=settings), 0.5)])
        env.reset(seed=0)
        total = []
        for _ in range(3):
            _, reward, term, trunc, info = env.step("<think>x</think><action>look</action>")
            rubric = info["rubric"]
            assert set(rubric) == {"trca", "judge"} and info["trca"] is rubric["trca"]
            assert reward == pytest.approx(rubric["trca"]["reward"] + 0.5 * rubric["judge"]["reward"]
                                           + info["env_reward"])
            total.append(reward)
            if term or trunc:
                break
        assert rubric["judge"]["verdicts"] and rubric["judge"]["weight"] == 0.5
        traj = info["trajectory"]
        path = tmp_path / "t.jsonl"
        rubricgym.save_jsonl(path, [traj])
        back = rubricgym.load_jsonl(path)[0]
        assert set(back.transitions[-1].info["rubric"]) == {"trca", "judge"}
        assert back.transitions[-1].info["rubric"]["judge"]["verdicts"] == rubric["judge"]["verdicts"]
        env.close()
    finally:
        srv.stop()


# -- the example plugin, installed into a throwaway venv ----------------------------------------------
def _throwaway_venv(tmp_path: Path) -> Path:
    """A venv that sees the project's .venv (rubricgym and its dependencies) through a .pth,
    so installing the plugin there never leaks its entry point into the project's .venv."""
    target = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(target)
    python = target / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "rubricgym_project.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(EXAMPLE),
                    "-w", str(wheels)], check=True, capture_output=True, timeout=300)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", *map(str, wheels.glob("*.whl"))],
                   check=True, capture_output=True, timeout=300)
    return python


@pytest.mark.slow
def test_example_plugin_adds_its_env_and_validates_and_trains(tmp_path):
    python = _throwaway_venv(tmp_path)

    def cli(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
        return subprocess.run([str(python), "-m", "rubricgym.cli", *args], capture_output=True, text=True,
                              cwd=tmp_path, timeout=timeout)

    probe = subprocess.run([str(python), "-c", "import gymnasium as gym, rubricgym; print('Lights-Rubric-v0' in gym.registry)"],
                           capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert probe.stdout.strip() == "True", probe.stderr
    validated = cli("library", "validate", str(EXAMPLE / "lights_bench" / "library.yaml"), "--env", "Lights-Rubric-v0")
    assert validated.returncode == 0 and "OK against Lights-Rubric-v0" in validated.stdout, validated.stderr
    demo = cli("demo", "--env", "Lights-Rubric-v0", "--plain")
    assert demo.returncode == 0 and "2/2 tasks won" in demo.stdout, demo.stderr
    trained = cli("train", "--set", "env.id=Lights-Rubric-v0", "--model", "tiny", "--set", "algorithm.group_size=2",
                  "--set", "env.max_steps=3", "--set", "warmup.enabled=false", "--set", "run.evaluate_after=false",
                  "--iterations", "1", "--output-dir", str(tmp_path / "runs"), "--quiet")
    assert trained.returncode == 0, trained.stderr[-2000:]
    metrics = next((tmp_path / "runs").rglob("metrics.jsonl")).read_text().splitlines()
    assert any(json.loads(line).get("iteration") == 1 for line in metrics)
    # the project's own venv never sees the plugin
    assert "Lights" not in BENCHMARKS


# -- the wheel with core dependencies only -----------------------------------------------------------
@pytest.mark.slow
@pytest.mark.xdist_group("source-tree-wheel")  # both build in the source tree (build/, *.egg-info)
def test_wheel_imports_with_core_dependencies_and_names_every_extra(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(ROOT),
                    "-w", str(wheels)], check=True, capture_output=True, timeout=600)
    target = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(target)
    python = str(target / "bin" / "python")
    # the set-up's installer (uv with pip's configuration; pip if uv fails): the same resolution
    installed = subprocess.run([sys.executable, str(ROOT / "scripts" / "fast_install.py"), "--python", python, "-q",
                                *map(str, wheels.glob("rubricgym-*.whl"))],
                               env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
                               capture_output=True, text=True, timeout=900)
    assert installed.returncode == 0, installed.stderr[-2000:]
    code = """
import json, gymnasium as gym, rubricgym
out = {}
for env_id, bench in sorted(rubricgym.registration.env_ids().items()):
    try:
        gym.make(env_id).close(); out[env_id] = "made"
    except rubricgym.BenchmarkNotInstalled as exc:
        out[env_id] = str(exc)
print(json.dumps(out))
"""
    run = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    results = json.loads(run.stdout.strip().splitlines()[-1])
    assert results and "ALFWorld-Rubric-v0" in results
    for env_id, message in results.items():
        assert "pip install 'rubricgym[" in message, (env_id, message)
