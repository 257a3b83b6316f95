"""Tensor-parallel decoding: the serving engine split over the ranks of a group.

Each rank runs the same engine (``cl.serving.engine.Engine``: paged KV cache,
continuous batching) on its shard of every layer, as Megatron-LM splits one:

* attention by heads: q, k and v are **column-parallel** (a rank keeps the rows
  of its query heads and of the key/value heads they share), so a rank computes
  its heads' attention alone and caches only its heads' keys and values;
  o is **row-parallel** (the matching columns), giving a partial sum;
* the MLP: gate and up are column-parallel, down row-parallel.

So one decoding step needs two all-reduces per layer, one after attention and
one after the MLP, each of ``tokens x hidden x bytes per value``: a few KiB per
token, small enough that their cost is the link's latency, not its bandwidth.
Embeddings, norms and the output head are small and kept whole on every rank.
Every rank samples the same token, so the ranks schedule alike with no further
messages. With two GPUs or more the same code runs on CUDA tensors over NCCL.

Run it from a shell and compare with one process::

    torchrun --nproc-per-node 2 -m clusterlab.serving_cluster.ranks
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F

from clusterlab.core.validate import check_int
from clusterlab.serving.engine import Engine, Request


def _shard(size: int, rank: int, world_size: int, what: str) -> slice:
    if size % world_size:
        raise ValueError(
            f"{what}={size} must be divisible by the tensor-parallel size "
            f"world_size={world_size}"
        )
    step = size // world_size
    return slice(rank * step, (rank + 1) * step)


@dataclass
class LayerShard:
    """One rank's shard of a decoder layer: weights as plain tensors."""

    q: torch.Tensor  # (my heads x head_dim, hidden): column-parallel
    k: torch.Tensor  # (my KV heads x head_dim, hidden)
    v: torch.Tensor
    o: torch.Tensor  # (hidden, my heads x head_dim): row-parallel
    gate: torch.Tensor  # (ffn / tp, hidden): column-parallel
    up: torch.Tensor
    down: torch.Tensor  # (hidden, ffn / tp): row-parallel
    in_norm: torch.Tensor
    post_norm: torch.Tensor
    act: object


def shard_layer(layer, rank: int, world_size: int, head_dim: int) -> LayerShard:
    """Cut ``rank``'s shard out of a ``transformers`` Llama decoder layer."""
    att, mlp = layer.self_attn, layer.mlp
    for lin in (att.q_proj, att.o_proj, mlp.gate_proj, mlp.down_proj):
        if lin.bias is not None:
            raise ValueError("model has linear biases: the split expects none")
    n_heads = att.q_proj.out_features // head_dim
    n_kv = att.k_proj.out_features // head_dim
    heads = _shard(n_heads, rank, world_size, "num_attention_heads")
    kv = _shard(n_kv, rank, world_size, "num_key_value_heads")
    ffn = _shard(mlp.gate_proj.out_features, rank, world_size, "intermediate_size")

    def rows(w, s):
        return w.detach()[s.start * head_dim : s.stop * head_dim].clone()

    return LayerShard(
        q=rows(att.q_proj.weight, heads),
        k=rows(att.k_proj.weight, kv),
        v=rows(att.v_proj.weight, kv),
        o=att.o_proj.weight.detach()[
            :, heads.start * head_dim : heads.stop * head_dim
        ].clone(),
        gate=mlp.gate_proj.weight.detach()[ffn].clone(),
        up=mlp.up_proj.weight.detach()[ffn].clone(),
        down=mlp.down_proj.weight.detach()[:, ffn].clone(),
        in_norm=layer.input_layernorm.weight.detach().clone(),
        post_norm=layer.post_attention_layernorm.weight.detach().clone(),
        act=mlp.act_fn,
    )


class TensorParallelEngine(Engine):
    """The serving engine on one rank of a tensor-parallel group.

    Args:
        model: the whole ``transformers`` Llama (each rank keeps its shard of it
            and drops the rest; a real server would load only its shard).
        rank, world_size: this rank and the group's size, which must divide the
            attention heads, the KV heads and the MLP's width.
        group: the process group (None: the whole world).
        device: where the shard and the cache live (CUDA with NCCL).
        **engine: ``Engine``'s keyword arguments (block size, ...).

    ``comm_log`` gets one ``{"layer", "where", "bytes", "time_s"}`` record per
    all-reduce.
    """

    def __init__(self, model, rank, world_size, group=None, device="cpu", **engine):
        self.world_size = check_int("world_size", world_size, 1)
        self.rank = check_int("rank", rank, 0, world_size - 1)
        self.group, self.device = group, torch.device(device)
        self.comm_log: list[dict] = []
        super().__init__(model, **engine)
        self.k_cache = [c.to(self.device) for c in self.k_cache]
        self.v_cache = [c.to(self.device) for c in self.v_cache]

    def _read_weights(self, model) -> None:
        super()._read_weights(model)
        self.shards = [
            shard_layer(layer, self.rank, self.world_size, self.head_dim)
            for layer in self.layers
        ]
        self.n_heads //= self.world_size
        self.n_kv_heads //= self.world_size
        dev = self.device
        for s in self.shards:
            for name in ("q", "k", "v", "o", "gate", "up", "down"):
                setattr(s, name, getattr(s, name).to(dev))
            s.in_norm, s.post_norm = s.in_norm.to(dev), s.post_norm.to(dev)
        self.layers = self.shards  # the full layers are no longer referenced
        self.embed, self.lm_head = self.embed.to(dev), self.lm_head.to(dev)
        self.final_norm, self.inv_freq = self.final_norm.to(dev), self.inv_freq.to(dev)

    def weight_bytes(self) -> int:
        """Bytes of the sharded layers this rank holds (replicated parts left out)."""
        names = ("q", "k", "v", "o", "gate", "up", "down")
        return sum(
            getattr(s, n).numel() * getattr(s, n).element_size()
            for s in self.shards
            for n in names
        )

    def _all_reduce(self, x: torch.Tensor, layer: int, where: str) -> torch.Tensor:
        x = x.contiguous()
        t0 = time.perf_counter()
        dist.all_reduce(x, group=self.group)
        if x.is_cuda:
            torch.cuda.synchronize(x.device)
        nbytes = x.numel() * x.element_size()
        self.comm_log.append(
            dict(layer=layer, where=where, bytes=nbytes, tokens=x.shape[0],
                 time_s=time.perf_counter() - t0)
        )  # fmt: skip
        return x

    def _attend(self, q, layer: int, req: Request, start: int) -> torch.Tensor:
        n, end = q.shape[0], start + q.shape[0]
        slots = self._slots(req, 0, end).to(self.device)
        group = self.n_heads // self.n_kv_heads
        k = self.k_cache[layer][slots].repeat_interleave(group, dim=1)
        v = self.v_cache[layer][slots].repeat_interleave(group, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) * self.head_dim**-0.5
        key_pos = torch.arange(end, device=self.device)
        query_pos = torch.arange(start, end, device=self.device)
        scores = scores.masked_fill(key_pos[None, :] > query_pos[:, None], -torch.inf)
        half = self.dtype in (torch.float16, torch.bfloat16)
        weights = scores.softmax(dim=-1, dtype=torch.float32 if half else None)
        return torch.einsum("hqk,khd->qhd", weights.to(self.dtype), v).reshape(n, -1)

    @torch.no_grad()
    def _forward(self, batch: list[tuple[Request, int]]) -> torch.Tensor:
        """The engine's forward pass on this rank's heads and MLP columns, with
        one all-reduce after attention and one after the MLP in every layer."""
        ids, positions, slots, spans = [], [], [], []
        for req, n in batch:
            start = req.computed
            ids += req.tokens[start : start + n]
            positions.append(torch.arange(start, start + n))
            slots.append(self._slots(req, start, start + n))
            spans.append((len(ids) - n, len(ids)))
        dev = self.device
        positions, slots = torch.cat(positions).to(dev), torch.cat(slots).to(dev)
        x = self.embed[torch.tensor(ids, device=dev)]
        for i, s in enumerate(self.shards):
            h = self._rms_norm(x, s.in_norm)
            q = F.linear(h, s.q).view(len(ids), self.n_heads, self.head_dim)
            k = F.linear(h, s.k).view(len(ids), self.n_kv_heads, self.head_dim)
            v = F.linear(h, s.v).view(len(ids), self.n_kv_heads, self.head_dim)
            q, k = self._rotate(q, positions), self._rotate(k, positions)
            self.k_cache[i][slots] = k
            self.v_cache[i][slots] = v
            out = torch.cat(
                [
                    self._attend(q[a:b], i, req, req.computed)
                    for (req, _), (a, b) in zip(batch, spans, strict=True)
                ]
            )
            x = x + self._all_reduce(F.linear(out, s.o), i, "attention")
            h = self._rms_norm(x, s.post_norm)
            mlp = F.linear(s.act(F.linear(h, s.gate)) * F.linear(h, s.up), s.down)
            x = x + self._all_reduce(mlp, i, "mlp")
        last = torch.tensor([b - 1 for _, b in spans], device=dev)
        return F.linear(self._rms_norm(x[last], self.final_norm), self.lm_head).cpu()


def rank_device(rank: int) -> torch.device:
    """CUDA device ``rank`` under NCCL, else the CPU."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", rank)
    return torch.device("cpu")


def tp_decode_worker(rank, world_size, prompts, new_tokens=8, seed=0, model_kw=None):
    """One rank of tensor-parallel decoding of ``prompts`` with the tiny Llama.

    Every rank builds the same seeded model (``cl.serving.tiny.tiny_model``,
    float64 unless ``model_kw`` says otherwise) and keeps its shard.

    Returns:
        dict ``outputs`` (prompt index -> generated token ids), ``comm`` (one
        record per all-reduce), ``shard_weight_bytes``, ``kv_heads`` (cached
        on this rank) and ``step_s`` (each decoding step's wall time).
    """
    from clusterlab.serving.tiny import tiny_model

    model = tiny_model(seed=seed, **(model_kw or {}))
    engine = TensorParallelEngine(model, rank, world_size, device=rank_device(rank))
    del model
    for i, p in enumerate(prompts):
        engine.add_request(list(p), max_new_tokens=new_tokens, request_id=str(i))
    steps = []
    while engine.has_unfinished():
        t0 = time.perf_counter()
        engine.step()
        steps.append(time.perf_counter() - t0)
    out = engine.pop_finished()
    return {
        "outputs": {int(k): v for k, v in out.items()},
        "comm": engine.comm_log,
        "shard_weight_bytes": engine.weight_bytes(),
        "kv_heads": engine.n_kv_heads,
        "step_s": steps,
    }


def allreduce_sweep_worker(rank, world_size, sizes_bytes, repeats=20, dtype="float64"):
    """Time ``all_reduce`` at each message size; the fastest of ``repeats``.

    Returns:
        A list of ``(size_bytes, best_s, median_s)`` (rank 0's clock).
    """
    dt = getattr(torch, dtype)
    dev = rank_device(rank)
    rows = []
    for size in sizes_bytes:
        n = max(1, int(size) // torch.empty(0, dtype=dt).element_size())
        x = torch.ones(n, dtype=dt, device=dev)
        times = []
        for _ in range(repeats + 2):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(x)
            if x.is_cuda:
                torch.cuda.synchronize(dev)
            times.append(time.perf_counter() - t0)
        times = sorted(times[2:])
        rows.append((n * x.element_size(), times[0], times[len(times) // 2]))
    return rows


def _main() -> None:  # pragma: no cover - run under torchrun
    import os

    from clusterlab.core.backend import choose_backend

    world_size, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    dist.init_process_group(choose_backend(world_size))
    try:
        prompts = [[1, 2, 3], [7, 8, 9, 10, 11]]
        res = tp_decode_worker(rank, world_size, prompts, new_tokens=8)
        from clusterlab.serving.tiny import tiny_model

        model = tiny_model()
        same = all(
            model.generate(torch.tensor([p]), max_new_tokens=8, do_sample=False)[
                0, len(p) :
            ].tolist()
            == res["outputs"][i]
            for i, p in enumerate(prompts)
        )
        sent = sum(r["bytes"] for r in res["comm"])
        print(f"rank {rank}: equals one process: {same}; all-reduced {sent} bytes")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":  # pragma: no cover
    _main()


__all__ = [
    "LayerShard",
    "TensorParallelEngine",
    "allreduce_sweep_worker",
    "rank_device",
    "shard_layer",
    "tp_decode_worker",
]
