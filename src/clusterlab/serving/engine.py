"""A serving engine in one file: a paged KV cache and continuous batching.

The engine takes a Llama-architecture ``transformers`` causal LM, reads its
weights and config, and runs the layers itself with its own paged attention, in
the model's dtype. What it teaches is what vLLM and SGLang are built on:

- **a paged KV cache**: keys and values live in fixed-size blocks; each request
  has a block table (its logical blocks to physical ones), so memory is handed
  out a block at a time and freed when the request ends or is preempted;
- **prefix caching**: a full block is named by a hash of every token up to its
  end, so a prompt that starts like another one reuses its computed blocks;
- **chunked prefill**: a long prompt is computed a chunk per step, sharing the
  step's token budget with the decodes of the running requests;
- **continuous batching**: requests join and leave the batch at every step; when
  blocks run out, the newest request is preempted and recomputed later.

Greedy decoding is the checked path: request by request, the output equals
``model.generate(..., do_sample=False)``, whatever the batch::

    engine = Engine(model, block_size=16)
    engine.add_request([1, 2, 3], max_new_tokens=8)
    outputs = engine.run_until_done()   # {request_id: [8 token ids]}
"""

from __future__ import annotations

import hashlib
import itertools
from collections import OrderedDict, deque
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from clusterlab.core.validate import check_int

# The cache holds this many tokens when num_blocks is not given.
DEFAULT_CACHE_TOKENS = 8192


@dataclass
class Request:
    """One request: its tokens, how many have keys and values, its blocks."""

    request_id: str
    prompt: list[int]
    max_new_tokens: int
    output: list[int] = field(default_factory=list)
    computed: int = 0  # tokens whose keys and values are in the cache
    blocks: list[int] = field(default_factory=list)  # the block table
    hashed: int = 0  # leading blocks already named in the prefix cache
    digest: bytes = b""  # the name of the last of them

    @property
    def tokens(self) -> list[int]:
        return self.prompt + self.output


class BlockPool:
    """Fixed-size blocks with reference counts and a prefix cache over them.

    A block whose count falls to zero is free. If it holds a named (hashed)
    full block it stays findable until it is reused, oldest first, so a prompt
    that comes back finds its blocks again.
    """

    def __init__(self, num_blocks: int):
        self.num_blocks = num_blocks
        self.refs = [0] * num_blocks
        self.hash_of: dict[int, bytes] = {}
        self.block_of: dict[bytes, int] = {}
        # Free blocks in the order they are taken: unnamed ones first.
        self.free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self.peak = 0

    @property
    def used(self) -> int:
        return self.num_blocks - len(self.free)

    def allocate(self, n: int) -> list[int] | None:
        """``n`` fresh blocks, or None (and nothing taken) if too few are free."""
        if n > len(self.free):
            return None
        out = []
        for _ in range(n):
            block, _ = self.free.popitem(last=False)
            digest = self.hash_of.pop(block, None)
            if digest is not None:  # evict the oldest cached block
                del self.block_of[digest]
            self.refs[block] = 1
            out.append(block)
        self.peak = max(self.peak, self.used)
        return out

    def release(self, blocks: list[int]) -> None:
        """Drop one reference to each block; free the ones nobody holds."""
        for block in reversed(blocks):  # a prompt's tail is evicted before its head
            self.refs[block] -= 1
            if self.refs[block] == 0:
                self.free[block] = None
                if block not in self.hash_of:
                    self.free.move_to_end(block, last=False)

    def lookup(self, digest: bytes) -> int | None:
        """Take a reference to the cached block named ``digest``, if there is one."""
        block = self.block_of.get(digest)
        if block is not None:
            if self.refs[block] == 0:
                del self.free[block]
            self.refs[block] += 1
            self.peak = max(self.peak, self.used)
        return block

    def name(self, block: int, digest: bytes) -> None:
        """Make a computed full block findable (the first one with a name keeps it)."""
        if digest not in self.block_of:
            self.block_of[digest] = block
            self.hash_of[block] = digest


def block_hash(parent: bytes, tokens: list[int]) -> bytes:
    """The name of a full block: a hash of its tokens and of every block before."""
    return hashlib.sha256(parent + repr(tokens).encode()).digest()


class Engine:
    """A continuous-batching engine over a paged KV cache (module docstring).

    Args:
        model: a ``transformers`` Llama-architecture causal LM (``LlamaForCausalLM``).
        block_size: tokens per KV-cache block, in [1, 1024].
        num_blocks: blocks in the cache (None: room for 8192 tokens).
        max_batch_tokens: tokens computed per step, at least 1 (None: 512).
        max_batch_requests: requests per step, at least 1 (None: 64).
        prefix_caching: reuse the full blocks of a prompt seen before.
    """

    def __init__(
        self,
        model,
        *,
        block_size: int = 16,
        num_blocks: int | None = None,
        max_batch_tokens: int | None = None,
        max_batch_requests: int | None = None,
        prefix_caching: bool = True,
    ):
        config = getattr(model, "config", None)
        if getattr(config, "model_type", None) != "llama":
            kind = getattr(config, "model_type", type(model).__name__)
            raise ValueError(
                f"model={kind!r} is not supported: the engine runs Llama-architecture "
                "causal LMs (model_type 'llama')"
            )
        rope = getattr(config, "rope_parameters", None) or {}
        if rope.get("rope_type", "default") in ("dynamic", "longrope"):
            raise ValueError(
                f"model's rope_type={rope['rope_type']!r} is not supported: its "
                "frequencies change with the sequence length"
            )
        self.block_size = check_int("block_size", block_size, 1, 1024)
        if num_blocks is None:
            num_blocks = -(-DEFAULT_CACHE_TOKENS // self.block_size)
        self.num_blocks = check_int("num_blocks", num_blocks, 1)
        self.max_batch_tokens = check_int(
            "max_batch_tokens", 512 if max_batch_tokens is None else max_batch_tokens, 1
        )
        self.max_batch_requests = check_int(
            "max_batch_requests",
            64 if max_batch_requests is None else max_batch_requests,
            1,
        )
        self.prefix_caching = bool(prefix_caching)
        self._read_weights(model)
        self.pool = BlockPool(self.num_blocks)
        shape = (self.num_blocks * self.block_size, self.n_kv_heads, self.head_dim)
        # One flat tensor of slots per layer: slot = block * block_size + offset.
        self.k_cache = [torch.zeros(shape, dtype=self.dtype) for _ in self.layers]
        self.v_cache = [torch.zeros(shape, dtype=self.dtype) for _ in self.layers]
        eos = getattr(model.generation_config, "eos_token_id", None)
        self.eos = set([eos] if isinstance(eos, int) else (eos or []))
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.requests: dict[str, Request] = {}
        self.finished: dict[str, list[int]] = {}
        self._ids = itertools.count()
        self._counts = dict(preemptions=0, prefix_hit_tokens=0, steps=0, aborted=0)

    # -- the model: weights read from transformers' own modules ------------------
    def _read_weights(self, model) -> None:
        c = model.config
        self.vocab_size = c.vocab_size
        self.max_positions = c.max_position_embeddings
        self.n_heads = c.num_attention_heads
        self.n_kv_heads = c.num_key_value_heads
        self.head_dim = getattr(c, "head_dim", None) or c.hidden_size // self.n_heads
        self.eps = c.rms_norm_eps
        inner = model.model
        self.embed = inner.embed_tokens.weight.detach()
        self.dtype = self.embed.dtype
        self.layers = list(inner.layers)
        self.final_norm = inner.norm.weight.detach()
        self.lm_head = model.lm_head.weight.detach()
        # The rotary frequencies as the model computed them (rope scaling included).
        self.inv_freq = inner.rotary_emb.inv_freq.detach().float()
        self.rope_scale = inner.rotary_emb.attention_scaling

    def _rms_norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        # As transformers does: the variance in float32, whatever the dtype.
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return weight * x32.to(x.dtype)

    def _rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotary embedding of ``x`` (tokens, heads, head_dim) at ``positions``."""
        freqs = positions.float()[:, None] * self.inv_freq[None, :]
        angles = torch.cat((freqs, freqs), dim=-1)
        cos = (angles.cos() * self.rope_scale).to(x.dtype)[:, None, :]
        sin = (angles.sin() * self.rope_scale).to(x.dtype)[:, None, :]
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    def _attend(self, q, layer: int, req: Request, start: int) -> torch.Tensor:
        """Causal attention of ``q`` (n, heads, dim) at positions start.. over the
        request's cached keys and values, gathered through its block table."""
        n, end = q.shape[0], start + q.shape[0]
        slots = self._slots(req, 0, end)
        k = self.k_cache[layer][slots].repeat_interleave(
            self.n_heads // self.n_kv_heads, dim=1
        )
        v = self.v_cache[layer][slots].repeat_interleave(
            self.n_heads // self.n_kv_heads, dim=1
        )
        scores = torch.einsum("qhd,khd->hqk", q, k) * self.head_dim**-0.5
        key_pos = torch.arange(end)
        query_pos = torch.arange(start, end)
        scores = scores.masked_fill(key_pos[None, :] > query_pos[:, None], -torch.inf)
        # Half precision takes its softmax in float32, as transformers does.
        half = self.dtype in (torch.float16, torch.bfloat16)
        soft_dtype = torch.float32 if half else None
        weights = scores.softmax(dim=-1, dtype=soft_dtype).to(self.dtype)
        return torch.einsum("hqk,khd->qhd", weights, v).reshape(n, -1)

    def _slots(self, req: Request, start: int, end: int) -> torch.Tensor:
        pos = torch.arange(start, end)
        table = torch.tensor(req.blocks, dtype=torch.long)
        return table[pos // self.block_size] * self.block_size + pos % self.block_size

    @torch.no_grad()
    def _forward(self, batch: list[tuple[Request, int]]) -> torch.Tensor:
        """Compute the scheduled tokens of every request in one pass; return the
        logits of each request's last scheduled token (requests, vocab)."""
        ids, positions, slots, spans = [], [], [], []
        for req, n in batch:
            start = req.computed
            ids += req.tokens[start : start + n]
            positions.append(torch.arange(start, start + n))
            slots.append(self._slots(req, start, start + n))
            spans.append((len(ids) - n, len(ids)))
        positions, slots = torch.cat(positions), torch.cat(slots)
        x = self.embed[torch.tensor(ids)]
        for i, layer in enumerate(self.layers):
            att, mlp = layer.self_attn, layer.mlp
            h = self._rms_norm(x, layer.input_layernorm.weight)
            q = att.q_proj(h).view(len(ids), self.n_heads, self.head_dim)
            k = att.k_proj(h).view(len(ids), self.n_kv_heads, self.head_dim)
            v = att.v_proj(h).view(len(ids), self.n_kv_heads, self.head_dim)
            q, k = self._rotate(q, positions), self._rotate(k, positions)
            self.k_cache[i][slots] = k
            self.v_cache[i][slots] = v
            out = torch.cat(
                [
                    self._attend(q[a:b], i, req, req.computed)
                    for (req, _), (a, b) in zip(batch, spans, strict=True)
                ]
            )
            x = x + att.o_proj(out)
            h = self._rms_norm(x, layer.post_attention_layernorm.weight)
            x = x + mlp.down_proj(mlp.act_fn(mlp.gate_proj(h)) * mlp.up_proj(h))
        last = torch.tensor([b - 1 for _, b in spans])
        return F.linear(self._rms_norm(x[last], self.final_norm), self.lm_head)

    # -- requests ------------------------------------------------------------------
    def add_request(
        self, prompt_ids: list[int], max_new_tokens: int, request_id: str | None = None
    ) -> str:
        """Queue a request; it joins the running batch at a later step.

        Args:
            prompt_ids: the prompt's token ids, each in [0, vocab_size).
            max_new_tokens: tokens to generate, at least 1.
            request_id: a name not in use (None: one is made up).

        Returns:
            The request's id.
        """
        prompt = list(prompt_ids)
        if not prompt:
            raise ValueError("prompt_ids=[] is empty: give at least one token id")
        for tok in prompt:
            if isinstance(tok, bool) or not isinstance(tok, int):
                raise ValueError(f"prompt_ids holds {tok!r}: token ids are integers")
            if not 0 <= tok < self.vocab_size:
                raise ValueError(
                    f"prompt_ids holds {tok}, outside the vocabulary: allowed "
                    f"[0, {self.vocab_size - 1}]"
                )
        check_int("max_new_tokens", max_new_tokens, 1)
        if len(prompt) + max_new_tokens > self.max_positions:
            raise ValueError(
                f"max_new_tokens={max_new_tokens} with a prompt of {len(prompt)} "
                f"tokens passes the model's {self.max_positions} positions: allowed "
                f"[1, {self.max_positions - len(prompt)}]"
            )
        # The last generated token is never fed back, so it needs no slot.
        need = -(-(len(prompt) + max_new_tokens - 1) // self.block_size)
        if need > self.num_blocks:
            raise ValueError(
                f"prompt_ids of {len(prompt)} tokens with max_new_tokens="
                f"{max_new_tokens} needs {need} blocks of {self.block_size} tokens; "
                f"the cache holds num_blocks={self.num_blocks}: it can never fit"
            )
        if request_id is None:
            request_id = f"req-{next(self._ids)}"
            while request_id in self.requests or request_id in self.finished:
                request_id = f"req-{next(self._ids)}"
        elif request_id in self.requests or request_id in self.finished:
            raise ValueError(f"request_id={request_id!r} is already in use")
        req = Request(str(request_id), prompt, int(max_new_tokens))
        self.requests[req.request_id] = req
        self.waiting.append(req)
        return req.request_id

    def abort_request(self, request_id: str) -> bool:
        """Drop a request (a client that went away) and free its blocks."""
        req = self.requests.pop(request_id, None)
        if req is None:
            return False
        if req in self.running:
            self.running.remove(req)
        else:
            self.waiting.remove(req)
        self.pool.release(req.blocks)
        req.blocks = []
        self._counts["aborted"] += 1
        return True

    def has_unfinished(self) -> bool:
        return bool(self.running or self.waiting)

    # -- scheduling ----------------------------------------------------------------
    def _grow(self, req: Request, n: int) -> bool:
        """Give ``req`` the blocks to hold ``n`` more tokens; False if too few free."""
        need = -(-(req.computed + n) // self.block_size) - len(req.blocks)
        if need <= 0:
            return True
        blocks = self.pool.allocate(need)
        if blocks is None:
            return False
        req.blocks += blocks
        return True

    def _preempt(self, req: Request) -> None:
        """Free every block of ``req`` and queue it first, to be recomputed."""
        self.running.remove(req)
        self.pool.release(req.blocks)
        req.blocks, req.computed, req.hashed, req.digest = [], 0, 0, b""
        self.waiting.appendleft(req)
        self._counts["preemptions"] += 1

    def _reuse_prefix(self, req: Request) -> None:
        """Take the cached blocks that ``req``'s tokens start with."""
        tokens, bs = req.tokens, self.block_size
        parent = b""
        # Leave at least one token to compute: its logits give the next token.
        for i in range((len(tokens) - 1) // bs):
            digest = block_hash(parent, tokens[i * bs : (i + 1) * bs])
            block = self.pool.lookup(digest)
            if block is None:
                break
            req.blocks.append(block)
            parent = digest
        req.hashed, req.digest = len(req.blocks), parent
        req.computed = req.hashed * bs
        self._counts["prefix_hit_tokens"] += req.computed

    def _schedule(self) -> list[tuple[Request, int]]:
        """This step's batch: (request, tokens to compute) pairs."""
        budget, batch, preempted = self.max_batch_tokens, [], False
        for req in list(self.running):
            if req not in self.running:  # preempted by an older request
                continue
            if budget == 0 or len(batch) == self.max_batch_requests:
                break
            n = min(len(req.tokens) - req.computed, budget)
            while not self._grow(req, n):
                preempted = True
                self._preempt(self.running[-1])  # the newest gives way
                if req not in self.running:
                    break
            if req in self.running:
                batch.append((req, n))
                budget -= n
        while self.waiting and not preempted and budget > 0:
            if len(self.running) == self.max_batch_requests:
                break
            if len(batch) == self.max_batch_requests:
                break
            req = self.waiting[0]
            if self.prefix_caching:
                self._reuse_prefix(req)
            n = min(len(req.tokens) - req.computed, budget)
            if not self._grow(req, n):
                self.pool.release(req.blocks)
                self._counts["prefix_hit_tokens"] -= req.computed
                req.blocks, req.computed, req.hashed, req.digest = [], 0, 0, b""
                break
            self.waiting.popleft()
            self.running.append(req)
            batch.append((req, n))
            budget -= n
        return batch

    def step(self) -> list[tuple[str, int]]:
        """Run one iteration: schedule, compute, and sample.

        Returns:
            The tokens this iteration produced, as (request_id, token id) pairs.
        """
        batch = self._schedule()
        if not batch:
            return []
        logits = self._forward(batch)
        self._counts["steps"] += 1
        produced = []
        for (req, n), row in zip(batch, logits, strict=True):
            req.computed += n
            if self.prefix_caching:
                self._name_full_blocks(req)
            if req.computed < len(req.tokens):
                continue  # a prefill chunk: no token yet
            token = int(row.argmax())
            req.output.append(token)
            produced.append((req.request_id, token))
            if len(req.output) == req.max_new_tokens or token in self.eos:
                self.running.remove(req)
                self.pool.release(req.blocks)
                req.blocks = []
                del self.requests[req.request_id]
                self.finished[req.request_id] = req.output
        return produced

    def _name_full_blocks(self, req: Request) -> None:
        """Name the request's newly computed full blocks in the prefix cache."""
        tokens, bs = req.tokens, self.block_size
        for i in range(req.hashed, req.computed // bs):
            req.digest = block_hash(req.digest, tokens[i * bs : (i + 1) * bs])
            self.pool.name(req.blocks[i], req.digest)
            req.hashed = i + 1

    def pop_finished(self) -> dict[str, list[int]]:
        """The generated tokens of the requests finished since the last call."""
        done, self.finished = self.finished, {}
        return done

    def run_until_done(self) -> dict[str, list[int]]:
        """Step until no request is left; every finished request's tokens."""
        while self.has_unfinished():
            self.step()
        return self.pop_finished()

    def stats(self) -> dict:
        """Counts of blocks and requests, for charts and tests."""
        return dict(
            blocks_total=self.num_blocks,
            blocks_used=self.pool.used,
            blocks_peak=self.pool.peak,
            blocks_cached=len(self.pool.block_of),
            running=len(self.running),
            waiting=len(self.waiting),
            **self._counts,
        )
