"""The serving engine against transformers' own generate, request by request."""

import random

import pytest
import torch

from clusterlab.serving.engine import Engine
from clusterlab.serving.tiny import ByteTokenizer, tiny_model

NEW_TOKENS = 6


@pytest.fixture(scope="module")
def model():
    return tiny_model(seed=1)


@pytest.fixture(scope="module")
def prompts():
    """24 prompts of mixed lengths; eight start with the same 33 tokens."""
    rng = random.Random(7)
    shared = [rng.randrange(256) for _ in range(33)]
    out = [[rng.randrange(256) for _ in range(rng.randrange(1, 40))] for _ in range(16)]
    out += [shared + [rng.randrange(256) for _ in range(i % 5)] for i in range(8)]
    return out


@pytest.fixture(scope="module")
def expected(model, prompts):
    want = []
    for p in prompts:
        ids = torch.tensor([p])
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=NEW_TOKENS,
            do_sample=False,
        )
        want.append(out[0, len(p) :].tolist())
    return want


def run_in_random_order(engine, prompts, seed):
    """Add the requests in a shuffled order, a few at a time between steps."""
    rng = random.Random(seed)
    order = list(range(len(prompts)))
    rng.shuffle(order)
    # The shared-prefix prompts come last, so their prefix is cached by then.
    order.sort(key=lambda i: i >= 16)
    names = {}
    while order:
        for i in order[: rng.randrange(1, 5)]:
            names[i] = engine.add_request(prompts[i], NEW_TOKENS)
        order = [i for i in order if i not in names]
        for _ in range(rng.randrange(0, 3)):
            engine.step()
    done = engine.run_until_done()
    return [done[names[i]] for i in range(len(prompts))]


@pytest.mark.parametrize("block_size, num_blocks", [(1, 80), (16, 6)])
def test_engine_equals_generate(model, prompts, expected, block_size, num_blocks):
    engine = Engine(
        model, block_size=block_size, num_blocks=num_blocks, max_batch_tokens=48
    )
    got = run_in_random_order(engine, prompts, seed=block_size)
    assert got == expected
    stats = engine.stats()
    assert stats["preemptions"] > 0, "the cache was meant to be too small"
    assert stats["prefix_hit_tokens"] >= 32, "the shared prefix was not reused"
    assert stats["blocks_used"] == 0 and stats["blocks_peak"] == num_blocks
    assert stats["running"] == 0 and stats["waiting"] == 0


def test_engine_without_prefix_caching_reports_no_hits(model, prompts, expected):
    engine = Engine(model, block_size=4, prefix_caching=False, max_batch_requests=5)
    names = [engine.add_request(p, NEW_TOKENS) for p in prompts[14:20]]
    done = engine.run_until_done()
    assert [done[n] for n in names] == expected[14:20]
    assert engine.stats()["prefix_hit_tokens"] == 0
    assert engine.stats()["blocks_used"] == 0


def test_a_broken_engine_fails_the_comparison(model, prompts, expected):
    """The comparison can fail: an engine whose rotary positions are stretched.

    (Shifting every position by one would not do: rotary attention sees only
    the distance between two tokens.)
    """
    engine = Engine(model, block_size=16)
    rotate = engine._rotate
    engine._rotate = lambda x, positions: rotate(x, positions * 2)
    names = [engine.add_request(p, NEW_TOKENS) for p in prompts[:8]]
    done = engine.run_until_done()
    assert [done[n] for n in names] != expected[:8]


def test_abort_frees_the_blocks(model):
    engine = Engine(model, block_size=4)
    rid = engine.add_request(list(range(30)), 20)
    engine.step()
    assert engine.stats()["blocks_used"] == 8
    assert engine.abort_request(rid)
    assert engine.stats()["blocks_used"] == 0 and not engine.has_unfinished()
    assert engine.run_until_done() == {}


@pytest.mark.parametrize(
    "prompt, new, word",
    [
        ([], 4, "prompt_ids"),
        ([1, 256], 4, "prompt_ids"),
        ([1, -1], 4, "prompt_ids"),
        ([1, 2.0], 4, "prompt_ids"),
        ([1, 2], 0, "max_new_tokens"),
        ([1] * 60, 10, "never fit"),
        ([1] * 2000, 100, "max_new_tokens"),
    ],
)
def test_bad_requests_raise_naming_the_argument(model, prompt, new, word):
    engine = Engine(model, block_size=16, num_blocks=4)
    with pytest.raises(ValueError, match=word):
        engine.add_request(prompt, new)


def test_bad_engine_arguments(model):
    with pytest.raises(ValueError, match="block_size=0"):
        Engine(model, block_size=0)
    with pytest.raises(ValueError, match="num_blocks=0"):
        Engine(model, num_blocks=0)
    with pytest.raises(ValueError, match="max_batch_tokens=0"):
        Engine(model, max_batch_tokens=0)
    with pytest.raises(ValueError, match="model="):
        Engine(torch.nn.Linear(2, 2))
    engine = Engine(model)
    engine.add_request([1], 1, request_id="a")
    with pytest.raises(ValueError, match="request_id='a'"):
        engine.add_request([1], 1, request_id="a")


def test_byte_detokenizer_never_splits_a_character():
    tok = ByteTokenizer()
    text = "naïve café, 日本語, 🙂 and a stray byte"
    ids = tok.encode(text) + [0xFF, 0xE6]
    assert tok.decode(tok.encode(text)) == text
    detok = tok.detokenizer()
    pieces = [detok.push(i) for i in ids] + [detok.flush()]
    assert "".join(pieces) == tok.decode(ids)
    assert all("\ufffd" not in p for p in pieces[: len(tok.encode(text))])


def test_config_variants_and_chunked_prefill():
    """Llama 3 rope scaling, biases, a head_dim of its own, tied embeddings; long
    prompts computed 16 tokens a step."""
    rope = dict(rope_type="llama3", rope_theta=5000.0, factor=8.0)
    rope |= dict(low_freq_factor=1.0, high_freq_factor=4.0)
    rope |= dict(original_max_position_embeddings=64)
    model = tiny_model(
        seed=3,
        head_dim=24,
        attention_bias=True,
        mlp_bias=True,
        tie_word_embeddings=True,
        rope_parameters=rope,
    )
    rng = random.Random(0)
    prompts = [[rng.randrange(256) for _ in range(n)] for n in (1, 5, 100, 130)]
    want = []
    for p in prompts:
        ids = torch.tensor([p])
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=6)
        want.append(out[0, len(p) :].tolist())
    engine = Engine(model, block_size=8, max_batch_tokens=16)
    names = [engine.add_request(p, 6) for p in prompts]
    done = engine.run_until_done()
    assert [done[n] for n in names] == want
    # 236 prompt tokens at 16 a step: at least 15 steps before the last token.
    assert engine.stats()["steps"] >= 15 + 5
