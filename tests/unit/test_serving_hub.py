"""The real-model path of Lab 21, offline: a local model directory, and the hub gone."""

from __future__ import annotations

import pytest
import torch

from clusterlab.serving.measure import hub_demo


def _local_model(folder):
    """A small Llama and a byte-level BPE tokenizer, saved as transformers saves."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {chr(c) if chr(c).isalnum() else f"<{c}>": c for c in range(128)}
    vocab = {k: i for i, k in enumerate(dict.fromkeys([*vocab, " "]))}
    raw = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<0>"))
    raw.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    raw.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="<0>")
    tok.save_pretrained(folder)
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(vocab), hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=256,
    )  # fmt: skip
    LlamaForCausalLM(cfg).save_pretrained(folder)


def test_a_local_model_runs_through_the_engine_as_generate_does(tmp_path):
    _local_model(tmp_path)
    out = hub_demo(str(tmp_path), prompt="hello world", max_new_tokens=8)
    assert out["ok"], out.get("why")
    assert out["same_as_generate"] and out["text"].startswith("hello world")


def test_a_model_that_cannot_load_is_said_not_raised(tmp_path):
    # an empty folder: transformers fails at once, without trying the network
    out = hub_demo(str(tmp_path))
    assert not out["ok"] and "the tiny model stands in" in out["why"]


def test_a_bad_token_budget_is_named():
    with pytest.raises(ValueError, match="max_new_tokens"):
        hub_demo("tiny", max_new_tokens=0)
