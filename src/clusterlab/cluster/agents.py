"""torchrun across emulated nodes, as on a real cluster: one agent per node.

Each node runs ``torchrun --nnodes N --nproc-per-node G --rdzv-backend c10d
--rdzv-endpoint NODE0:PORT`` (``core.torchrun.agent_command``) inside its
namespace, with ``--local-addr`` its own address (the host name resolves to
the host, which the nodes cannot reach), node 0 told that it hosts the store
(``is_host``), and gloo on ``eth0``. The agents meet
at node 0's rendezvous store, start their ranks, and the job's result is the
``RESULT`` line rank 0 prints.
"""

from __future__ import annotations

import json
import subprocess
import time

from clusterlab.core.torchrun import agent_command, torchrun_env

RDZV_PORT = 29400


def run_torchrun(cluster, per_node: int, module: str, *args, timeout_s: float = 120.0):
    """Run ``python -m module *args`` under one torchrun agent per node.

    Args:
        cluster: an entered ``EmulatedCluster``.
        per_node: ranks each agent starts.
        module: what every rank runs.
        *args: its command-line arguments.
        timeout_s: how long the whole job may take; then every agent is killed.

    Returns:
        The JSON object of the ``RESULT`` line that some rank printed.

    Raises:
        RuntimeError: an agent failed or the job ran out of time (with its output).
    """
    nodes = cluster.topology.nodes
    endpoint = f"{cluster.address(0)}:{RDZV_PORT}"
    procs = []
    for node in range(nodes):
        cmd = agent_command(module, *args, nnodes=nodes, nproc=per_node,
                            rdzv_id=cluster.id, rdzv_endpoint=endpoint,
                            join_timeout_s=int(timeout_s))  # fmt: skip
        at = cmd.index("-m", 3)
        cmd[at:at] = [f"--local-addr={cluster.address(node)}"]
        # torchrun finds the store's host by name; node 0's address has none, so
        # node 0 is told that it hosts the store.
        conf = next(i for i, a in enumerate(cmd) if a.startswith("--rdzv-conf="))
        cmd[conf] += f",is_host={'true' if node == 0 else 'false'}"
        env = {**torchrun_env(), "GLOO_SOCKET_IFNAME": "eth0"}
        procs.append(cluster.popen(node, cmd, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True))  # fmt: skip
    deadline = time.monotonic() + timeout_s
    outs = []
    try:
        for p in procs:
            left = max(1.0, deadline - time.monotonic())
            outs.append(p.communicate(timeout=left)[0])
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        tails = [p.communicate(timeout=10)[0][-1500:] for p in procs]
        raise RuntimeError(
            f"torchrun across {nodes} nodes ran past {timeout_s} s:\n"
            + "\n".join(tails)
        ) from None
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    for node, (p, out) in enumerate(zip(procs, outs, strict=True)):
        if p.returncode != 0:
            raise RuntimeError(f"the agent on node {node} failed:\n{out[-3000:]}")
    for out in outs:
        for line in out.splitlines():
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT ") :])
    raise RuntimeError("no rank printed a RESULT line:\n" + "\n".join(outs)[-3000:])
