"""An OpenAI-compatible completions server over the book's engine.

Run it, and point any OpenAI client at it::

    python -m clusterlab.serving.server --host 127.0.0.1 --port 8000 --model tiny

    from openai import OpenAI
    client = OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="none")
    client.completions.create(model="tiny", prompt="Hello", max_tokens=16)

It serves ``POST /v1/completions`` (a prompt as text or token ids, greedy
decoding, streamed as server-sent events when ``stream`` is true),
``GET /v1/models`` and ``GET /health`` (the engine's block and request counts).
The HTTP side is FastAPI on uvicorn; the engine steps in one thread beside it,
taking new requests and dropping abandoned ones between steps, so a request
joins the running batch at the next step. ``--model tiny`` (the default) is a
seeded random Llama with a byte-level tokenizer; any other value is a
``transformers`` model id or path, loaded with its own tokenizer.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import ipaddress
import json
import queue
import signal
import socket
import sys
import threading
import time
import uuid
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse

from clusterlab.serving.engine import Engine
from clusterlab.serving.tiny import ByteTokenizer, tiny_model


class HFDetokenizer:
    """Incremental decoding for a ``transformers`` tokenizer.

    Text is released only once the tokens so far decode to it without a
    trailing replacement character, so a character spread over several tokens
    is never split (the method of vLLM and TGI: decode a short window again).
    """

    def __init__(self, tokenizer):
        self.tok, self.ids, self.prefix, self.read = tokenizer, [], 0, 0

    def _text(self, a: int, b: int | None = None) -> str:
        return self.tok.decode(self.ids[a:b], skip_special_tokens=True)

    def push(self, token: int) -> str:
        self.ids.append(token)
        before, now = self._text(self.prefix, self.read), self._text(self.prefix)
        if len(now) > len(before) and not now.endswith("\ufffd"):
            self.prefix, self.read = self.read, len(self.ids)
            return now[len(before) :]
        return ""

    def flush(self) -> str:
        return self._text(self.prefix)[len(self._text(self.prefix, self.read)) :]


class HFTokenizer:
    """A ``transformers`` tokenizer behind the byte tokenizer's three methods."""

    def __init__(self, tokenizer):
        self.tok = tokenizer
        self.vocab_size = len(tokenizer)

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text)

    def detokenizer(self) -> HFDetokenizer:
        return HFDetokenizer(self.tok)


class BadRequest(Exception):
    """A request the server refuses, with its HTTP status and the field at fault."""

    def __init__(self, message: str, param: str | None = None, status: int = 400):
        super().__init__(message)
        self.message, self.param, self.status = message, param, status


class EngineLoop:
    """The engine in its own thread: commands in, tokens out to each request.

    Only this thread touches the engine. Handlers submit and abort through a
    queue; tokens go back to a handler's ``asyncio.Queue`` on its event loop.
    """

    def __init__(self, engine: Engine):
        self.engine = engine
        self.commands: queue.Queue = queue.Queue()
        self.streams: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Queue]] = {}
        self.stats = engine.stats()
        #: (requests given a token, seconds per step) of the latest steps, newest last.
        self.steps: collections.deque = collections.deque(maxlen=2048)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="engine", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def submit(self, prompt: list[int], max_tokens: int) -> tuple[str, asyncio.Queue]:
        rid = f"cmpl-{uuid.uuid4().hex}"
        out: asyncio.Queue = asyncio.Queue()
        self.streams[rid] = (asyncio.get_running_loop(), out)
        self.commands.put(("add", rid, prompt, max_tokens))
        return rid, out

    def abort(self, rid: str) -> None:
        self.commands.put(("abort", rid))

    def _send(self, rid: str, item) -> None:
        loop, out = self.streams[rid]
        try:
            loop.call_soon_threadsafe(out.put_nowait, item)
        except RuntimeError:  # the event loop closed: the server is stopping
            pass

    def _run(self) -> None:
        engine, last = self.engine, None
        while not self._stop.is_set():
            try:  # wait for work only when there is none
                block = not engine.has_unfinished()
                while True:
                    cmd = self.commands.get(block=block, timeout=0.1 if block else None)
                    block = False
                    if cmd[0] == "add":
                        try:  # the handler checked first: this is a backstop
                            engine.add_request(cmd[2], cmd[3], request_id=cmd[1])
                        except ValueError as exc:
                            self._send(cmd[1], ("error", str(exc)))
                            self.streams.pop(cmd[1], None)
                    elif engine.abort_request(cmd[1]):
                        self.streams.pop(cmd[1], None)
            except queue.Empty:
                pass
            started = time.perf_counter()
            produced = engine.step()
            ended = time.perf_counter()
            if produced:  # the batch: the requests this step gave a token
                # a step straight after another is timed from that one's end, so
                # the loop's own work and the HTTP threads' share of the CPU
                # count: the time the queue sees per step
                since = ended - (last if last is not None else started)
                self.steps.append((len(produced), since))
            last = ended if produced and engine.has_unfinished() else None
            for rid, token in produced:
                self._send(rid, ("token", token))
            for rid, tokens in engine.pop_finished().items():
                reason = "stop" if tokens[-1] in engine.eos else "length"
                self._send(rid, ("done", reason))
                self.streams.pop(rid)
            self.stats = engine.stats()


def parse_completion(body: Any, model_name: str, tokenizer, max_positions: int):
    """Check a ``/v1/completions`` body; return (prompt ids, max_tokens, stream)."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    allowed = {"model", "prompt", "max_tokens", "temperature", "stream", "n", "user"}
    allowed |= {"top_p", "seed", "stop"}
    for key in body:
        if key not in allowed:
            raise BadRequest(
                f"{key} is not supported: allowed {', '.join(sorted(allowed))}", key
            )
    if body.get("model") != model_name:
        raise BadRequest(
            f"model={body.get('model')!r} does not exist: this server has "
            f"{model_name!r}",
            "model",
            404,
        )
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        ids = tokenizer.encode(prompt)
    elif isinstance(prompt, list) and all(
        isinstance(t, int) and not isinstance(t, bool) for t in prompt
    ):
        ids = prompt
    else:
        raise BadRequest(
            f"prompt={prompt!r} must be a string or a list of token ids", "prompt"
        )
    if not ids:
        raise BadRequest("prompt is empty: give at least one token", "prompt")
    bad = [t for t in ids if not 0 <= t < tokenizer.vocab_size]
    if bad:
        raise BadRequest(
            f"prompt holds token {bad[0]}: allowed [0, {tokenizer.vocab_size - 1}]",
            "prompt",
        )
    max_tokens = body.get("max_tokens", 16)
    room = max_positions - len(ids)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise BadRequest(f"max_tokens={max_tokens!r} must be an integer", "max_tokens")
    if not 1 <= max_tokens <= room:
        raise BadRequest(
            f"max_tokens={max_tokens} is out of range: allowed [1, {room}] "
            f"for a prompt of {len(ids)} tokens",
            "max_tokens",
        )
    for key, only in (("temperature", 0), ("n", 1), ("top_p", 1)):
        value = body.get(key)
        if value is not None and (isinstance(value, bool) or value != only):
            raise BadRequest(
                f"{key}={value!r} is not supported: this server decodes greedily, "
                f"allowed {only}",
                key,
            )
    if body.get("stop"):
        raise BadRequest(
            f"stop={body['stop']!r} is not supported: allowed null", "stop"
        )
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest(f"stream={stream!r} must be true or false", "stream")
    return ids, max_tokens, stream


def error_body(message: str, param: str | None, status: int) -> dict:
    kind = "invalid_request_error" if status == 400 else "not_found_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


def build_app(engine: Engine, tokenizer, model_name: str):
    """The FastAPI app: the three routes over an engine running in its thread."""
    loop = EngineLoop(engine)

    @asynccontextmanager
    async def lifespan(app):
        loop.start()
        yield
        loop.stop()

    app = FastAPI(title="clusterlab serving", lifespan=lifespan)
    created = int(time.time())

    @app.exception_handler(RequestValidationError)
    async def invalid(request, exc):
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(x) for x in first.get("loc", ()))
        message = f"{where}: {first.get('msg', 'invalid request')}"
        return JSONResponse(error_body(message, where or None, 400), status_code=400)

    @app.get("/health")
    async def health():
        steps = [list(step) for step in list(loop.steps)]
        return {
            "status": "ok",
            "model": model_name,
            "engine": loop.stats,
            "steps": steps,
        }

    @app.get("/v1/models")
    async def models():
        card = {"id": model_name, "object": "model", "created": created}
        return {"object": "list", "data": [{**card, "owned_by": "clusterlab"}]}

    def chunk(rid: str, text: str, reason: str | None, usage=None) -> dict:
        choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": reason}
        out = {"id": rid, "object": "text_completion", "created": int(time.time())}
        out |= {"model": model_name, "choices": [choice]}
        if usage is not None:
            out["usage"] = usage
        return out

    @app.post("/v1/completions")
    async def completions(request: Request):
        try:
            body = json.loads(await request.body())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return JSONResponse(
                error_body(f"the body is not JSON: {exc}", None, 400), 400
            )
        try:
            ids, max_tokens, stream = parse_completion(
                body, model_name, tokenizer, engine.max_positions
            )
        except BadRequest as exc:
            return JSONResponse(
                error_body(exc.message, exc.param, exc.status), status_code=exc.status
            )
        need = -(-(len(ids) + max_tokens - 1) // engine.block_size)
        if need > engine.num_blocks:
            message = (
                f"max_tokens={max_tokens} with a prompt of {len(ids)} tokens needs "
                f"{need} blocks; the cache holds {engine.num_blocks}: it can never fit"
            )
            return JSONResponse(error_body(message, "max_tokens", 400), 400)
        rid, out = loop.submit(ids, max_tokens)
        detok, n = tokenizer.detokenizer(), 0

        def usage() -> dict:
            return dict(
                prompt_tokens=len(ids), completion_tokens=n, total_tokens=len(ids) + n
            )

        def piece(kind: str, value) -> tuple[str, str | None]:
            """The text one message from the engine adds, and a finish reason."""
            nonlocal n
            if kind == "token":
                n += 1
                return detok.push(value), None
            if kind == "error":
                raise BadRequest(value)
            return detok.flush(), value

        if stream:

            async def events():
                reason = None
                try:
                    while reason is None:
                        try:
                            text, reason = piece(*await out.get())
                        except BadRequest as exc:
                            reason = "error"
                            error = error_body(exc.message, None, 400)
                            yield f"data: {json.dumps(error)}\n\n"
                            break
                        # One event per token, its text empty while a character's
                        # bytes are incomplete: a client sees every token arrive.
                        extra = usage() if reason else None
                        data = json.dumps(chunk(rid, text, reason, extra))
                        yield f"data: {data}\n\n"
                    yield "data: [DONE]\n\n"
                finally:  # a client that went away frees its blocks
                    if reason is None:
                        loop.abort(rid)

            return StreamingResponse(events(), media_type="text/event-stream")

        parts, reason = [], None
        try:
            while reason is None:
                try:
                    message = await asyncio.wait_for(out.get(), timeout=0.5)
                except TimeoutError:
                    if await request.is_disconnected():
                        return JSONResponse(error_body("gone", None, 499), 499)
                    continue
                try:
                    text, reason = piece(*message)
                except BadRequest as exc:
                    reason = "error"
                    return JSONResponse(error_body(exc.message, None, 400), 400)
                parts.append(text)
        finally:
            if reason is None:
                loop.abort(rid)
        return chunk(rid, "".join(parts), reason, usage())

    return app


def is_loopback(host: str) -> bool:
    """True if every address ``host`` names is a loopback address."""
    try:
        infos = socket.getaddrinfo(host, None)
    except socket.gaierror:
        return False
    return all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


def load(model: str, dtype: str | None):
    """(model, tokenizer, name) for ``tiny`` or a ``transformers`` id or path."""
    import torch

    if model == "tiny":
        return (
            tiny_model(dtype=getattr(torch, dtype or "float64")),
            ByteTokenizer(),
            "tiny",
        )
    from transformers import AutoModelForCausalLM, AutoTokenizer

    hf = AutoModelForCausalLM.from_pretrained(
        model, dtype=getattr(torch, dtype or "float32")
    )
    return hf.eval(), HFTokenizer(AutoTokenizer.from_pretrained(model)), model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clusterlab.serving.server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument(
        "--model", default="tiny", help="tiny, or a transformers id or path"
    )
    parser.add_argument(
        "--dtype", default=None, help="float64 (tiny), float32, bfloat16"
    )
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--num-blocks", type=int, default=None)
    parser.add_argument("--max-batch-tokens", type=int, default=None)
    parser.add_argument("--max-batch-requests", type=int, default=None)
    parser.add_argument(
        "--allow-remote", action="store_true", help="listen beyond loopback"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch's threads for the engine's steps (1: a busy core beside the "
        "server slows a step, but never stalls it at a barrier between threads)",
    )
    args = parser.parse_args(argv)
    if not args.allow_remote and not is_loopback(args.host):
        print(
            f"--host {args.host} is not a loopback address: the server listens on "
            "127.0.0.1 or ::1 unless --allow-remote is given",
            file=sys.stderr,
        )
        return 2
    if not 0 <= args.port <= 65535:
        print(
            f"--port {args.port} is out of range: allowed [0, 65535]", file=sys.stderr
        )
        return 2
    if not 1 <= args.threads <= 256:
        print(
            f"--threads {args.threads} is out of range: allowed [1, 256]",
            file=sys.stderr,
        )
        return 2
    import torch
    import uvicorn

    torch.set_num_threads(args.threads)
    model, tokenizer, name = load(args.model, args.dtype)
    try:
        engine = Engine(
            model,
            block_size=args.block_size,
            num_blocks=args.num_blocks,
            max_batch_tokens=args.max_batch_tokens,
            max_batch_requests=args.max_batch_requests,
        )
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        build_app(engine, tokenizer, name),
        log_level="warning",
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    # Listen before saying where: a client that connects at once then waits in
    # the backlog until uvicorn accepts, instead of being refused (a bound
    # socket that does not listen yet refuses every connection).
    sock.listen(config.backlog)
    # uvicorn shuts down gracefully on SIGTERM or Ctrl-C, then raises the signal
    # again for the handler it found: this one, so the exit is a clean 0.
    try:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, _stopped)
        print(f"serving {name} on http://{args.host}:{port}/v1", flush=True)
        server.run(sockets=[sock])
    except Stopped:
        pass
    finally:
        sock.close()
    return 0


class Stopped(Exception):
    """SIGTERM or Ctrl-C, after the server has shut down."""


def _stopped(signum, frame):
    raise Stopped(signal.Signals(signum).name)


if __name__ == "__main__":
    sys.exit(main())
