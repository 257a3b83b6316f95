"""The server's parts that need no process: request checks, decoding, binding."""

import pytest

from clusterlab.serving.server import (
    BadRequest,
    HFDetokenizer,
    is_loopback,
    main,
    parse_completion,
)
from clusterlab.serving.tiny import ByteTokenizer


class BytesAsTokens:
    """A tokenizer whose decode is a byte-level BPE's: bytes, then UTF-8."""

    def decode(self, ids, skip_special_tokens=True):
        return bytes(ids).decode("utf-8", errors="replace")


def test_hf_detokenizer_never_splits_a_character():
    ids = list("a 日本 🙂 é".encode()) + [0xFF, 0x41]
    detok = HFDetokenizer(BytesAsTokens())
    pieces = [detok.push(i) for i in ids] + [detok.flush()]
    assert "".join(pieces) == BytesAsTokens().decode(ids)
    assert "日" in pieces and "🙂" in pieces


def test_parse_completion_accepts_text_and_ids():
    tok = ByteTokenizer()
    body = {"model": "tiny", "prompt": "hé", "max_tokens": 3, "temperature": 0}
    assert parse_completion(body, "tiny", tok, 64) == ([104, 195, 169], 3, False)
    body = {"model": "tiny", "prompt": [1, 2], "stream": True}
    assert parse_completion(body, "tiny", tok, 64) == ([1, 2], 16, True)


@pytest.mark.parametrize(
    "body, param, status",
    [
        ([1, 2], None, 400),
        ({"model": "other", "prompt": "x"}, "model", 404),
        ({"model": "tiny", "prompt": ["a", "b"]}, "prompt", 400),
        ({"model": "tiny", "prompt": "x", "max_tokens": 64}, "max_tokens", 400),
        ({"model": "tiny", "prompt": "x", "n": 2}, "n", 400),
        ({"model": "tiny", "prompt": "x", "stop": ["\n"]}, "stop", 400),
        ({"model": "tiny", "prompt": "x", "stream": "yes"}, "stream", 400),
    ],
)
def test_parse_completion_refuses_naming_the_field(body, param, status):
    with pytest.raises(BadRequest) as info:
        parse_completion(body, "tiny", ByteTokenizer(), 64)
    assert info.value.param == param and info.value.status == status


def test_it_binds_loopback_only_unless_told(capsys):
    assert is_loopback("127.0.0.1") and is_loopback("::1")
    assert not is_loopback("0.0.0.0")
    assert main(["--host", "0.0.0.0", "--port", "0"]) == 2
    assert "--allow-remote" in capsys.readouterr().err


def test_a_saved_transformers_model_and_tokenizer_load_and_serve(tmp_path):
    """The path for any model id: a byte-level BPE tokenizer and the tiny model,
    saved and loaded back the way a downloaded model is."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from clusterlab.serving.engine import Engine
    from clusterlab.serving.server import load
    from clusterlab.serving.tiny import tiny_model

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    bpe = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    PreTrainedTokenizerFast(tokenizer_object=bpe).save_pretrained(tmp_path)
    tiny_model(seed=4).save_pretrained(tmp_path)
    model, tok, name = load(str(tmp_path), "float64")
    assert name == str(tmp_path) and model.dtype == torch.float64
    ids = tok.encode("héllo 日本")
    detok = tok.detokenizer()
    assert "".join(detok.push(i) for i in ids) + detok.flush() == "héllo 日本"
    engine = Engine(model)
    rid = engine.add_request(ids, 5)
    x = torch.tensor([ids])
    want = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=5)
    assert engine.run_until_done()[rid] == want[0, len(ids) :].tolist()


def test_the_engine_loop_streams_tokens_and_reports_refusals():
    import asyncio

    from clusterlab.serving.engine import Engine
    from clusterlab.serving.server import EngineLoop
    from clusterlab.serving.tiny import tiny_model

    engine = Engine(tiny_model(), block_size=4, num_blocks=4)
    loop = EngineLoop(engine)

    async def ask(prompt, max_tokens):
        _, out = loop.submit(prompt, max_tokens)
        got = [await out.get()]
        while got[-1][0] == "token":
            got.append(await out.get())
        return got

    async def both():
        return await asyncio.gather(ask([1, 2, 3], 3), ask([1] * 30, 3))

    loop.start()
    try:
        fine, refused = asyncio.run(asyncio.wait_for(both(), timeout=30))
    finally:
        loop.stop()
    assert [k for k, _ in fine] == ["token"] * 3 + ["done"] and fine[-1][1] == "length"
    assert refused[0][0] == "error" and "never fit" in refused[0][1]
    assert engine.stats()["blocks_used"] == 0


def test_the_port_listens_before_the_server_says_where(monkeypatch, capsys):
    """A client that connects as soon as the address is printed is not refused.

    uvicorn only listens once its startup has run; a socket that is bound but
    not listening refuses every connection (a test client once met exactly
    that, ``Connection refused`` right after the line). Here uvicorn's run is
    replaced by a connect to the printed port, made before any startup.
    """
    import socket

    import uvicorn

    from clusterlab.serving import server

    seen = {}

    def connect_instead(self, sockets=None):
        port = int(capsys.readouterr().out.split(":")[-1].split("/")[0])
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            seen["port"] = port

    monkeypatch.setattr(uvicorn.Server, "run", connect_instead)
    assert server.main(["--port", "0", "--num-blocks", "8"]) == 0
    assert seen["port"] > 0
