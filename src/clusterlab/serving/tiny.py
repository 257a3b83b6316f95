"""The book's tiny model: a seeded random Llama and a byte-level tokenizer.

Nothing is downloaded: the weights are drawn from a seed, and the tokenizer's
tokens are the 256 byte values, so any text round-trips through it. The model
talks nonsense, but it is a real ``transformers`` ``LlamaForCausalLM`` (rotary
embeddings, grouped-query attention, RMSNorm), which is all a serving engine
needs to be checked against ``generate``.
"""

from __future__ import annotations

import codecs

import torch

from clusterlab.core.validate import check_int


def tiny_model(seed: int = 0, dtype: torch.dtype = torch.float64, **overrides):
    """A random ``LlamaForCausalLM`` over the 256 bytes, with no end-of-text token.

    Args:
        seed: the seed its weights are drawn from.
        dtype: its dtype; float64 by default, so that a request's greedy output
            never depends on the batch it ran in (float rounding differs with
            the batch's shape).
        overrides: ``LlamaConfig`` fields to change (layers, sizes, ...).

    Returns:
        The model, in eval mode.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    check_int("seed", seed, 0)
    fields = dict(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=172,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        # Wider than the default 0.02, so the random model's greedy text varies.
        initializer_range=0.2,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        tie_word_embeddings=False,
    )
    fields.update(overrides)
    config = LlamaConfig(**fields)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model = model.to(dtype).eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = None
    model.generation_config.bos_token_id = None
    return model


class ByteTokenizer:
    """Text to UTF-8 bytes and back: token ``i`` is the byte ``i``."""

    vocab_size = 256

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        return bytes(ids).decode("utf-8", errors="replace")

    def detokenizer(self) -> ByteDetokenizer:
        return ByteDetokenizer()


class ByteDetokenizer:
    """Incremental decoding that never splits a multi-byte UTF-8 character.

    ``push`` returns the text that the bytes so far complete; an unfinished
    character waits for its next bytes. ``"".join(pushes) + flush()`` equals
    ``ByteTokenizer().decode(all_ids)``.
    """

    def __init__(self):
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token: int) -> str:
        return self._decoder.decode(bytes([token]))

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)
