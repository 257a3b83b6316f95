"""The overlapped-DDP and ZeRO-1 exercises: the reference classes pass their
checks on real ranks, and each usual mistake fails them with its hint.

Each wrong class changes one thing in the reference (``cl.data_parallel.answer``),
so a failure names exactly the mistake the check must catch.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

import clusterlab as cl
from clusterlab.data_parallel import OverlappedDDP, ShardedOptimizer
from clusterlab.data_parallel.answer import gradient_buckets

check = cl.data_parallel.check


class NoDivide(OverlappedDDP):
    def finish_gradient_synchronization(self):
        self.world_size = 1  # sums, never divides
        super().finish_gradient_synchronization()


class SkipsLastBucket(OverlappedDDP):
    def _grad_ready(self, index, param):
        if index < len(self.buckets) - 1:  # the embedding's bucket never leaves
            super()._grad_ready(index, param)


class SkipsTied(OverlappedDDP):
    def _reduce_one(self, param):
        if param is not self.module.embed.weight:
            super()._reduce_one(param)


class HooksTiedTwice(OverlappedDDP):
    def __init__(self, module, bucket_size_mb=None):
        super().__init__(module, bucket_size_mb)
        if bucket_size_mb is None:  # as if reached once per layer that uses it
            module.head.weight.register_post_accumulate_grad_hook(self._reduce_one)


class HooksFrozen(OverlappedDDP):
    def __init__(self, module, bucket_size_mb=None):
        super().__init__(module, bucket_size_mb)
        for p in module.frozen.parameters():
            p.register_post_accumulate_grad_hook(self._reduce_one)


class NoBroadcast(OverlappedDDP):
    def __init__(self, module, bucket_size_mb=None):
        broadcast = dist.broadcast
        dist.broadcast = lambda *args, **kwargs: None
        try:
            super().__init__(module, bucket_size_mb)
        finally:
            dist.broadcast = broadcast


class AfterBackward(OverlappedDDP):
    """Hooks nothing: reduces everything once backward is over."""

    def _reduce_one(self, param):
        pass

    def _grad_ready(self, index, param):
        pass

    def finish_gradient_synchronization(self):
        for p in self.module.parameters():
            if p.grad is not None:
                self._pending.append(
                    (dist.all_reduce(p.grad, async_op=True), p.grad, None)
                )
        super().finish_gradient_synchronization()


class Blocking(OverlappedDDP):
    def _reduce_one(self, param):
        dist.all_reduce(param.grad)  # waits inside the backward pass
        param.grad.div_(self.world_size)

    def _grad_ready(self, index, param):
        self._ready[index] += 1
        if self._ready[index] == len(self.buckets[index]):
            for p in self.buckets[index]:
                dist.all_reduce(p.grad)
                p.grad.div_(self.world_size)


def test_the_reference_ddp_passes(capsys):
    assert check.OverlappedDDP(OverlappedDDP) is True
    out = capsys.readouterr().out
    assert "DDP's gradients on 2 ranks" in out and "ms left to wait" in out


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (NoDivide, "divide by the world size"),
        (SkipsLastBucket, "still holds this rank's own gradient"),
        (SkipsTied, "this parameter is tied"),
        (HooksTiedTwice, "hook and reduce it once"),
        (HooksFrozen, "raised RuntimeError: cannot register a hook"),
        (NoBroadcast, "broadcast rank 0's parameters and buffers when"),
        (AfterBackward, "started no dist.all_reduce during the backward pass"),
        (Blocking, "async_op=True"),
    ],
    ids=lambda x: getattr(x, "__name__", "hint"),
)
def test_a_wrong_ddp_fails_with_its_hint(wrong, hint):
    with pytest.raises(AssertionError, match=hint):
        check.OverlappedDDP(wrong)


class NoShardBroadcast(ShardedOptimizer):
    @torch.no_grad()
    def step(self, closure=None):
        self.local.step()


class FullState(torch.optim.Optimizer):
    """Right parameters, but every rank keeps the state of every parameter."""

    def __init__(self, params, optimizer_cls, **kwargs):
        self.inner, self.cls, self.kwargs = None, optimizer_cls, kwargs
        super().__init__(params, kwargs)

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        group = dict(self.param_groups[-1])
        if self.inner is None:
            self.inner = self.cls([group], **self.kwargs)
        else:
            self.inner.add_param_group(group)

    def step(self, closure=None):
        self.inner.step()


class DropsAddedGroups(ShardedOptimizer):
    """Shards the groups given at construction; later groups are never stepped."""

    def add_param_group(self, param_group):
        if getattr(self, "built", False):
            torch.optim.Optimizer.add_param_group(self, param_group)
            for p in self.param_groups[-1]["params"]:
                self.owner[p] = 0
            self._local_group.append(None)
            return
        super().add_param_group(param_group)
        self.built = True


class NotAnOptimizer:
    def __init__(self, params, optimizer_cls, **kwargs):
        self.inner = optimizer_cls(params, **kwargs)


def test_the_reference_sharded_optimizer_passes(capsys):
    assert check.ShardedOptimizer(ShardedOptimizer) is True
    assert "6,288 bytes per rank at most, of 12,576" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (NoShardBroadcast, "the ranks disagree"),
        (FullState, "build optimizer_cls over this rank's shard only"),
        (DropsAddedGroups, "add_param_group"),
        (NotAnOptimizer, "must subclass torch.optim.Optimizer"),
    ],
    ids=lambda x: getattr(x, "__name__", "hint"),
)
def test_a_wrong_sharded_optimizer_fails_with_its_hint(wrong, hint):
    with pytest.raises(AssertionError, match=hint):
        check.ShardedOptimizer(wrong)


def test_stubs_are_not_attempted_and_bad_input_is_refused(capsys):
    def stub(*args, **kwargs):
        raise NotImplementedError

    assert check.OverlappedDDP(stub) is False
    assert check.ShardedOptimizer(stub) is False
    assert capsys.readouterr().out.count("not attempted") == 2
    for fn in (check.OverlappedDDP, check.ShardedOptimizer):
        with pytest.raises(ValueError, match="cls="):
            fn(42)
        with pytest.raises(ValueError, match="world_size"):
            fn(OverlappedDDP, world_size=9)


def test_buckets_follow_the_cap_in_order():
    params = [torch.nn.Parameter(torch.zeros(n)) for n in (256, 256, 1024, 8)]
    sizes = [[p.numel() for p in b] for b in gradient_buckets(params, 2048 / 2**20)]
    assert sizes == [[256, 256], [1024], [8]]  # 1 KiB each, 4 KiB alone, then 32 B
    with pytest.raises(ValueError, match="bucket_size_mb"):
        OverlappedDDP(torch.nn.Linear(2, 2), bucket_size_mb=0)
