"""What ``gpu_check.py`` runs: a rank for the launcher, a small GPT, a decode run.

In a module of their own so that ranks started by spawn can import them.
"""

from __future__ import annotations

import math
import time

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

RECOMPUTE = ("none", "selective", "full")


def one_rank_all_reduce(rank: int, world_size: int) -> dict:
    """One all-reduce on this rank's GPU; its backend and sum."""
    import torch.distributed as dist

    x = torch.ones(1, device="cuda")
    dist.all_reduce(x)
    return {"backend": dist.get_backend(), "sum": float(x.item())}


class GPTLayer(nn.Module):
    """A GPT layer as Korthikanti et al. count it: scores kept, dropout, GeLU MLP.

    ``recompute="selective"`` checkpoints the core attention (scores, softmax,
    dropout, the product with V); ``"full"`` is applied by ``GPT`` around the
    whole layer.
    """

    def __init__(self, hidden: int, heads: int, dropout: float, recompute: str):
        super().__init__()
        self.heads, self.recompute = heads, recompute
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = (
            nn.Linear(hidden, 4 * hidden),
            nn.Linear(4 * hidden, hidden),
        )
        self.drop = nn.Dropout(dropout)

    def core(self, q, k, v):
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
        return self.drop(torch.softmax(scores, dim=-1)) @ v

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, -1).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        if self.recompute == "selective":
            ctx = checkpoint(self.core, q, k, v, use_reentrant=False)
        else:
            ctx = self.core(q, k, v)
        x = x + self.drop(self.proj(ctx.transpose(1, 2).reshape(b, s, h)))
        return x + self.drop(self.fc2(nn.functional.gelu(self.fc1(self.ln2(x)))))


class GPT(nn.Module):
    """``layers`` GPT layers; ``recompute="full"`` checkpoints each one."""

    def __init__(self, hidden, heads, layers, recompute="none", dropout=0.1):
        super().__init__()
        if recompute not in RECOMPUTE:
            raise ValueError(f"recompute={recompute!r} must be one of {RECOMPUTE}")
        self.recompute = recompute
        self.layers = nn.ModuleList(
            GPTLayer(hidden, heads, dropout, recompute) for _ in range(layers)
        )

    def forward(self, x):
        for layer in self.layers:
            if self.recompute == "full":
                x = checkpoint(layer, x, use_reentrant=False)
            else:
                x = layer(x)
        return x


def model_bytes(mode, hidden, seq_len, batch, heads, layers, formula="korthikanti"):
    """The book's activation model for ``GPT`` (``activation_memory_per_layer``)."""
    from clusterlab.models.activations import activation_memory_per_layer

    per_layer = activation_memory_per_layer(
        hidden, seq_len, batch, heads, recompute=mode, formula=formula
    )
    return float(per_layer * layers)


def saved_bytes(mode, hidden, seq_len, batch, heads, layers, device="cpu"):
    """Bytes of the tensors autograd saves for backward in a bf16 forward pass.

    Counted with ``torch.autograd.graph.saved_tensors_hooks``, each storage
    once, weights left out: the same quantity as the allocator's, on any device.
    """
    model = GPT(hidden, heads, layers, mode).to(device, torch.bfloat16).train()
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
        return t

    x = torch.randn(batch, seq_len, hidden, device=device, dtype=torch.bfloat16)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x)
    out.float().square().mean().backward()  # the graph is whole: backward runs
    return float(sum(n for ptr, n in seen.items() if ptr not in weights))


def activation_bytes(mode, device, hidden, seq_len, batch, heads, layers):
    """Bytes the allocator holds for backward after a bf16 forward, and the model's.

    Returns:
        ``(measured_bytes, model_bytes, peak_bytes)``: what the forward pass
        left allocated (its input included, its output left out), the book's
        model for it (``activation_memory_per_layer``, formula "korthikanti",
        times the layers), and ``torch.cuda.max_memory_allocated`` over the
        forward and backward pass, above the weights.
    """
    model = GPT(hidden, heads, layers, mode).to(device, torch.bfloat16).train()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    x = torch.randn(batch, seq_len, hidden, device=device, dtype=torch.bfloat16)
    out = model(x)
    torch.cuda.synchronize()
    kept = torch.cuda.memory_allocated() - base - out.nelement() * out.element_size()
    out.float().square().mean().backward()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    model_b = model_bytes(mode, hidden, seq_len, batch, heads, layers)
    return float(kept), model_b, float(peak)


def decode_tokens_per_s(quick: bool) -> tuple[float, float, int]:
    """Tokens/s of the serving engine over a decode-heavy batch, on the CPU.

    Returns:
        ``(tokens_per_s, weight_bytes, requests)``.
    """
    from clusterlab.serving.engine import Engine
    from clusterlab.serving.tiny import tiny_model

    size = dict(hidden_size=256, intermediate_size=688, num_hidden_layers=2)
    if not quick:
        size = dict(hidden_size=1024, intermediate_size=2752, num_hidden_layers=4)
    model = tiny_model(dtype=torch.float32, num_attention_heads=8,
                       num_key_value_heads=4, **size)  # fmt: skip
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    requests, new = (4, 16) if quick else (8, 64)
    best = float("inf")
    for _ in range(2):  # the first run warms up
        engine = Engine(model)
        for r in range(requests):
            engine.add_request([1 + r, 2, 3, 4, 5, 6, 7, 8], max_new_tokens=new)
        t0 = time.perf_counter()
        with torch.no_grad():
            out = engine.run_until_done()
        best = min(best, time.perf_counter() - t0)
    assert sum(len(v) for v in out.values()) == requests * new
    return requests * new / best, float(weight_bytes), requests
