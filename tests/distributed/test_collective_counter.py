"""The counter below torch.distributed reads what each rank hands to c10d."""

import pytest

import clusterlab as cl

pytestmark = [pytest.mark.dist]


def _count(rank, world_size):
    import torch
    import torch.distributed as dist

    from clusterlab.core.counting import count_collectives

    x = torch.ones(6)  # 24 B
    with count_collectives() as c:
        dist.all_gather([torch.empty(6) for _ in range(world_size)], x)
        dist.all_gather_into_tensor(torch.empty(6 * world_size), x)
        dist.reduce_scatter_tensor(torch.empty(3), x)
        rows = torch.ones(3 + rank, 2)  # uneven rows, 8 B each
        splits = [1 + rank, 2] if rank == 0 else [1, 3]
        out = torch.empty(2 if rank == 0 else 5, 2)
        dist.all_to_all_single(
            out, rows, output_split_sizes=[1, 1] if rank == 0 else [2, 3],
            input_split_sizes=splits,
        )  # fmt: skip
    return c.records


def test_a_gather_counts_its_input_as_sent_and_the_rest_as_received():
    r0, r1 = cl.launch(_count, 2, timeout=60)
    gathers = [r for r in r0 if r["op"] == "all_gather"]
    assert [g["bytes"] for g in gathers] == [24, 24]  # the input, not the output
    assert [g["received_bytes"] for g in gathers] == [24, 24]
    assert [r["bytes"] for r in r0 if r["op"] == "reduce_scatter"] == [24]
    a2a = [r for r in r1 if r["op"] == "all_to_all"][0]
    assert a2a["split_bytes"] == [8, 24] and a2a["dtype"] == "torch.float32"
