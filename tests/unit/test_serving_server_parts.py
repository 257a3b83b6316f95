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
