"""The completions server as readers run it: a real process, a real OpenAI client.

One server runs for the module, on a free loopback port, with a cache of 64
blocks of 4 tokens: 16 requests at once need more than that, so some wait (or
are preempted) and are answered later. The last test stops it with SIGTERM.
"""

import concurrent.futures
import os
import selectors
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest
import torch
from openai import BadRequestError, NotFoundError, OpenAI

from clusterlab.serving.tiny import ByteTokenizer, tiny_model

pytestmark = pytest.mark.dist
PROMPTS = [f"Request {i}: {'naïve café 日本 🙂'[: i + 1]}" for i in range(16)]
MAX_TOKENS = 24


class Server:
    def __init__(self):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        env |= {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
        args = ["--host", "127.0.0.1", "--port", "0", "--block-size", "4"]
        args += ["--num-blocks", "64"]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "clusterlab.serving.server", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        line = self._first_line(timeout_s=60)
        # "serving tiny on http://127.0.0.1:PORT/v1"
        self.base = line.split(" on ")[1].strip()
        self.port = int(self.base.rsplit(":", 1)[1].split("/")[0])
        self.client = OpenAI(base_url=self.base, api_key="none", max_retries=0)

    def _first_line(self, timeout_s: float) -> str:
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout=timeout_s):
            self.proc.kill()
            raise AssertionError("the server did not start in time")
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"the server failed: {self.proc.stderr.read()}")
        return line

    def health(self) -> dict:
        return httpx.get(f"http://127.0.0.1:{self.port}/health").json()

    def text(self, prompt, stream: bool, max_tokens: int = MAX_TOKENS) -> str:
        out = self.client.completions.create(
            model="tiny",
            prompt=prompt,
            max_tokens=max_tokens,
            temperature=0,
            stream=stream,
        )
        if not stream:
            assert out.choices[0].finish_reason == "length"
            assert out.usage.completion_tokens == max_tokens
            return out.choices[0].text
        return "".join(chunk.choices[0].text for chunk in out)


@pytest.fixture(scope="module")
def server():
    srv = Server()
    yield srv
    if srv.proc.poll() is None:
        srv.proc.kill()
        srv.proc.wait()


@pytest.fixture(scope="module")
def alone(server):
    """Each prompt's text, sent alone and not streamed."""
    return [server.text(p, stream=False) for p in PROMPTS]


def test_models_and_health(server):
    assert [m.id for m in server.client.models.list().data] == ["tiny"]
    health = server.health()
    assert health["status"] == "ok" and health["engine"]["blocks_total"] == 64


def test_the_text_is_the_models_own_greedy_text(server, alone):
    model, tok = tiny_model(), ByteTokenizer()
    for prompt, text in zip(PROMPTS[:2], alone[:2], strict=True):
        ids = torch.tensor([tok.encode(prompt)])
        out = model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=MAX_TOKENS
        )
        assert text == tok.decode(out[0, ids.shape[1] :].tolist())
    # A prompt as token ids is the same prompt.
    assert server.text(tok.encode(PROMPTS[0]), stream=False) == alone[0]


def test_streamed_text_equals_the_text(server, alone):
    assert server.text(PROMPTS[15], stream=True) == alone[15]


def test_sixteen_at_once_get_the_same_text_as_alone(server, alone):
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        futures = [
            pool.submit(server.text, p, stream=i % 2 == 0)
            for i, p in enumerate(PROMPTS)
        ]
        got = [f.result(timeout=120) for f in futures]
    assert got == alone
    after = server.health()["engine"]
    # 16 requests of ~40 tokens need ~160 blocks: the cache of 64 made them wait.
    assert after["blocks_peak"] == 64
    assert after["blocks_used"] == 0 and after["running"] == after["waiting"] == 0


@pytest.mark.parametrize(
    "body, param",
    [
        ({"model": "tiny", "prompt": "x", "max_tokens": 0}, "max_tokens"),
        ({"model": "tiny", "prompt": "x", "max_tokens": "ten"}, "max_tokens"),
        ({"model": "tiny", "max_tokens": 4}, "prompt"),
        ({"model": "tiny", "prompt": [1, 999], "max_tokens": 4}, "prompt"),
        ({"model": "tiny", "prompt": "", "max_tokens": 4}, "prompt"),
        ({"model": "tiny", "prompt": "x", "temperature": 0.7}, "temperature"),
        ({"model": "tiny", "prompt": "x", "max_tokens": 400}, "max_tokens"),
        ({"model": "tiny", "prompt": "x", "best_of": 2}, "best_of"),
    ],
)
def test_bad_requests_get_400_with_a_json_error(server, body, param):
    r = httpx.post(f"{server.base}/completions", json=body)
    assert r.status_code == 400
    assert r.json()["error"]["param"] == param


def test_unknown_model_malformed_json_and_the_client_errors(server):
    r = httpx.post(f"{server.base}/completions", content=b"{not json")
    assert r.status_code == 400 and "not JSON" in r.json()["error"]["message"]
    with pytest.raises(NotFoundError):
        server.client.completions.create(model="gpt-9", prompt="x", max_tokens=2)
    with pytest.raises(BadRequestError):
        server.client.completions.create(model="tiny", prompt="x", max_tokens=-1)


def test_a_client_that_leaves_mid_stream_frees_its_blocks(server):
    aborted = server.health()["engine"]["aborted"]
    body = {"model": "tiny", "prompt": "go", "max_tokens": 250, "stream": True}
    with httpx.stream("POST", f"{server.base}/completions", json=body) as r:
        lines = r.iter_lines()
        got = [next(lines) for _ in range(6)]  # three events and their blank lines
    assert all(g.startswith("data: {") for g in got[::2])
    for _ in range(100):
        engine = server.health()["engine"]
        if engine["aborted"] > aborted and engine["blocks_used"] == 0:
            break
        time.sleep(0.05)
    assert engine["aborted"] == aborted + 1, "the request ran on after its client left"
    assert engine["blocks_used"] == 0 and engine["running"] == 0


def test_sigterm_stops_it_with_nothing_left_listening(server):
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=20) == 0, server.proc.stderr.read()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", server.port)):
        pass
