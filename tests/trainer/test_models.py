"""rubricgym.models: the tiny test model and the offline SmolLM2 copy."""

from __future__ import annotations

import pytest
import torch

from rubricgym.models import ModelUnavailable, build_tiny_model, load_causal_lm


def test_tiny_model_is_deterministic_and_round_trips_text():
    m1, tok = build_tiny_model(seed=3)
    m2, _ = build_tiny_model(seed=3)
    m3, _ = build_tiny_model(seed=4)
    p1, p2, p3 = (next(m.parameters()) for m in (m1, m2, m3))
    assert torch.equal(p1, p2) and not torch.equal(p1, p3)
    text = "<think>é ✓ x</think>\n<action>go to fridge 1</action>"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text
    prompt = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n")
    assert tok.pad_token_id != tok.eos_token_id and tok.padding_side == "left"


def test_building_tiny_model_leaves_global_rng_alone():
    torch.manual_seed(0)
    a = torch.rand(3)
    torch.manual_seed(0)
    build_tiny_model(seed=9)
    assert torch.equal(torch.rand(3), a)


def test_unknown_model_name_is_a_clear_error():
    with pytest.raises(ModelUnavailable, match="neither a local folder"):
        load_causal_lm("no/such-model-anywhere")


def test_local_folder_round_trip(tmp_path):
    model, tok = build_tiny_model(seed=1)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded, tok2 = load_causal_lm(tmp_path, device="cpu")
    x = torch.tensor([[5, 6, 7]])
    with torch.no_grad():
        assert torch.allclose(model(x).logits, loaded(x).logits)
    assert tok2.padding_side == "left" and tok2.pad_token is not None


@pytest.mark.slow
def test_smollm2_loads_from_the_cached_conversion():
    from rubricgym.models import load_smollm2, smollm2_path

    model, tok = load_smollm2(device="cpu")
    assert (smollm2_path() / "model.safetensors").is_file()
    assert type(model).__name__ == "LlamaForCausalLM" and model.dtype == torch.float32
    assert getattr(model.config, "quantization_config", None) is None
    enc = tok(tok.apply_chat_template([{"role": "user", "content": "Say hi."}], tokenize=False,
                                      add_generation_prompt=True), return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=8, do_sample=False)
    assert out.shape[1] > enc["input_ids"].shape[1]
