"""One replica group of a fault-tolerant training run (torchft), on CPU and gloo.

Every group is one process with its own copy of a small model. Each step asks
torchft's lighthouse for a quorum (the groups alive now), trains on its share of
the data, averages the gradients of the quorum through ``manager.allreduce``, and
steps the optimizer only if ``manager.should_commit()`` says every group got
through the step. A group that dies takes its step with it: the survivors do not
commit it, form a smaller quorum and train it again. A group that comes back
*heals*: it receives the parameters, the optimizer state and the data position
from a live peer over the process group, and joins the next step.

Run the lighthouse, then three groups (each in its own shell)::

    torchft_lighthouse --bind 127.0.0.1:29510 --min_replicas 2 \
        --join_timeout_ms 1000 --heartbeat_timeout_ms 1000
    python -m clusterlab.fault_tolerance.train --lighthouse http://127.0.0.1:29510 \
        --replica-id 0 --steps 200 --log r0.jsonl

Each committed step writes one JSON line to ``--log``: ``step``, ``replica_id``,
``participants``, ``samples`` (the sample ids of this group's batch),
``params_sha256`` and ``healed_from`` (the peer it healed from, or null).

Each line also holds ``step_samples``, every sample the quorum trained in that
step (a group's own batch is one part of it; a group that did not commit a step
its peers committed logs nothing for it).

Data are read exactly once: the position in the data (the next batch, and the
batches of a step that were not trained) is part of the state a healing group
receives. In a step of ``W`` groups the group of quorum rank ``r`` reads slot
``r`` of ``assign_batches``; one entry per rank in the all-reduced tensor says
which slots were trained. A healing group trains nothing (torchft zeroes its
gradients), so its slot goes back to the queue; a step that does not commit
changes nothing, so its samples are trained in a later step.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import threading
import time

from clusterlab.core.validate import check_float, check_int

FEATURES = 8
HIDDEN = 16


def batch_samples(batch_index: int, batch: int) -> list[int]:
    """The sample ids of batch ``batch_index``: ``batch`` consecutive ids."""
    batch_index = check_int("batch_index", batch_index, 0)
    batch = check_int("batch", batch, 1, 4096)
    return list(range(batch_index * batch, (batch_index + 1) * batch))


def assign_batches(data: dict, quorum_size: int) -> list[int]:
    """The batch of each quorum rank: the queued batches first, then new ones.

    Args:
        data: the data position, ``{"next": int, "pending": [int]}``.
        quorum_size: the groups in the step's quorum, in [1, 4096].
    """
    w = check_int("quorum_size", quorum_size, 1, 4096)
    queued = list(data["pending"][:w])
    return queued + list(range(data["next"], data["next"] + w - len(queued)))


def advance(data: dict, quorum_size: int, trained) -> dict:
    """The data position after a committed step; ``trained[r]``: rank r trained.

    Batches whose rank did not train (a group that was healing) are queued
    again, so they are trained in a later step instead of being skipped.
    """
    slots = assign_batches(data, quorum_size)
    if len(trained) != len(slots):
        raise ValueError(
            f"trained has {len(trained)} entries: allowed one per rank, {len(slots)}"
        )
    queued = min(len(data["pending"]), len(slots))
    missed = [b for b, t in zip(slots, trained, strict=True) if not t]
    return {
        "next": data["next"] + len(slots) - queued,
        "pending": list(data["pending"][queued:]) + missed,
    }


def sample_tensors(samples: list[int], seed: int):
    """Inputs and targets of ``samples``: a fixed function of (seed, sample id)."""
    import torch

    xs, ys = [], []
    w = torch.Generator().manual_seed(seed)
    true_w = torch.randn(FEATURES, 1, generator=w, dtype=torch.float64)
    for s in samples:
        g = torch.Generator().manual_seed(seed * 1_000_003 + s)
        x = torch.randn(FEATURES, generator=g, dtype=torch.float64)
        xs.append(x)
        ys.append(torch.tanh(x @ true_w) + 0.1 * torch.randn(1, generator=g))
    if not xs:
        return torch.zeros(0, FEATURES, dtype=torch.float64), torch.zeros(
            0, 1, dtype=torch.float64
        )
    return torch.stack(xs), torch.stack(ys).to(torch.float64)


def make_model(seed: int):
    """The same small MLP in every group (same seed, float64)."""
    import torch

    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(FEATURES, HIDDEN),
        torch.nn.Tanh(),
        torch.nn.Linear(HIDDEN, 1),
    ).to(torch.float64)


def params_sha256(model) -> str:
    """SHA-256 of the parameters' bytes, in order: equal hashes, equal models."""
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def parse_args(argv=None) -> argparse.Namespace:
    """The command line (see the module docstring); bad values exit with a message."""
    p = argparse.ArgumentParser(
        prog="python -m clusterlab.fault_tolerance.train",
        description=__doc__.split("\n")[0],
    )
    p.add_argument(
        "--lighthouse", required=True, help="lighthouse URL, http://HOST:PORT"
    )
    p.add_argument("--replica-id", required=True, help="this group's id, e.g. 0")
    p.add_argument("--steps", type=int, required=True, help="train until this step")
    p.add_argument("--batch", type=int, default=4, help="samples per group per step")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log", required=True, help="JSON lines, one per committed step")
    p.add_argument("--step-ms", type=float, default=0.0, help="extra work per step")
    p.add_argument("--min-replicas", type=int, default=2, help="groups a commit needs")
    p.add_argument("--timeout-s", type=float, default=5.0, help="collective timeout")
    p.add_argument("--max-seconds", type=float, default=300.0, help="give up after")
    p.add_argument(
        "--host", default="127.0.0.1",
        help="the address every listener binds: loopback, or an emulated node's own",
    )  # fmt: skip
    args = p.parse_args(argv)
    try:
        check_int("steps", args.steps, 1, 1_000_000)
        check_int("batch", args.batch, 1, 4096)
        check_int("seed", args.seed, 0, 2**31 - 1)
        check_int("min_replicas", args.min_replicas, 1, 64)
        if not args.lighthouse.startswith("http://"):
            raise ValueError(
                f"lighthouse={args.lighthouse!r} must be a URL http://HOST:PORT"
            )
        check_float("step_ms", args.step_ms, 0.0, 10_000.0)
        check_float("timeout_s", args.timeout_s, 0.5, 600.0)
        check_float("max_seconds", args.max_seconds, 1.0, 86_400.0)
        from clusterlab.fault_tolerance.loopback import check_host

        check_host(args.host)
    except ValueError as err:
        p.error(str(err))
    return args


def _watchdog(seconds: float) -> None:
    """End the process if the run takes longer than ``seconds``: nothing hangs."""

    def expire():
        print(f"train: no finish within {seconds:g} s; giving up", file=sys.stderr)
        sys.stderr.flush()
        os._exit(3)

    t = threading.Timer(seconds, expire)
    t.daemon = True
    t.start()


def train(args: argparse.Namespace) -> int:
    """Run one replica group until step ``args.steps`` commits; return 0."""
    from clusterlab.fault_tolerance import loopback

    host = args.host
    loopback.loopback_env(host=host)
    from datetime import timedelta

    import torch
    from torch.distributed import ReduceOp
    from torchft import Manager, ProcessGroupGloo
    from torchft.checkpointing.pg_transport import PGTransport

    torch.set_num_threads(1)
    loopback.loopback_manager_server(host=host)
    store, port, _sock = loopback.loopback_store(host=host)
    timeout = timedelta(seconds=args.timeout_s)

    model = make_model(args.seed)
    optim = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    healed = {"from": None}
    data = {"next": 0, "pending": []}

    def state_dict():
        return {
            "model": model.state_dict(),
            "optim": optim.state_dict(),
            "data": {"next": data["next"], "pending": list(data["pending"])},
            "replica_id": str(args.replica_id),
        }

    def load_state_dict(sd):
        model.load_state_dict(sd["model"])
        optim.load_state_dict(sd["optim"])
        data.update(next=int(sd["data"]["next"]), pending=list(sd["data"]["pending"]))
        healed["from"] = sd["replica_id"]

    pg = ProcessGroupGloo(timeout=timeout)
    manager = Manager(
        pg=pg,
        load_state_dict=load_state_dict,
        state_dict=state_dict,
        min_replica_size=args.min_replicas,
        rank=0,
        world_size=1,
        store_addr=host,
        store_port=port,
        lighthouse_addr=args.lighthouse,
        replica_id=str(args.replica_id),
        hostname=host,
        checkpoint_transport=PGTransport(pg, timeout, torch.device("cpu")),
        init_sync=False,
        timeout=timeout,
        quorum_timeout=timedelta(seconds=4 * args.timeout_s + 10),
        connect_timeout=timedelta(seconds=10),
    )
    params = list(model.parameters())
    with open(args.log, "a", buffering=1) as log:
        while manager.current_step() < args.steps:
            manager.start_quorum()
            rank = manager.participating_rank()
            w = manager.num_participants()
            trains = rank is not None and manager.is_participating()
            slots = assign_batches(data, w)
            samples = batch_samples(slots[rank], args.batch) if trains else []
            x, y = sample_tensors(samples, args.seed)
            optim.zero_grad(set_to_none=False)
            for p in params:
                p.grad = torch.zeros_like(p)
            if samples:
                torch.nn.functional.mse_loss(model(x), y).backward()
            if args.step_ms:
                time.sleep(args.step_ms / 1000)
            mark = torch.zeros(w, dtype=torch.float64)
            if trains:
                mark[rank] = 1.0
            flat = torch.cat([p.grad.reshape(-1) for p in params] + [mark])
            manager.allreduce(flat, reduce_op=ReduceOp.SUM).wait()
            if not manager.should_commit():
                continue
            # A healing group loaded its peer's data position in should_commit.
            trained = [bool(t > 0.5) for t in flat[-w:]]
            slots = assign_batches(data, w)
            flat /= max(1, sum(trained))  # the mean over the groups that trained
            offset = 0
            for p in params:
                p.grad.copy_(flat[offset : offset + p.numel()].view_as(p))
                offset += p.numel()
            optim.step()
            data.update(advance(data, w, trained))
            step_samples = [
                s for b, t in zip(slots, trained, strict=True) if t
                for s in batch_samples(b, args.batch)
            ]  # fmt: skip
            record = {
                "step": manager.current_step(),
                "replica_id": str(args.replica_id),
                "participants": w,
                "samples": samples,
                "step_samples": sorted(step_samples),
                "params_sha256": params_sha256(model),
                "healed_from": healed["from"],
                "time": time.time(),
            }
            log.write(json.dumps(record) + "\n")
            healed["from"] = None
    manager.shutdown(wait=False)
    del store, _sock  # the store and its socket lived until here
    return 0


def main(argv=None) -> int:
    """The command's entry point."""
    args = parse_args(argv)
    _watchdog(args.max_seconds)
    code = train(args)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
