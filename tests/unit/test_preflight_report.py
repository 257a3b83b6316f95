"""The preflight check's arithmetic and report, and the job files that run it.

The Kubernetes job (a Kubeflow PyTorchJob) must run the same two steps as the
SLURM script: the same modules in the same order, the same c10d rendezvous
with a per-job id, and as many nodes and ranks per node.
"""

import re

import pytest
import yaml

from book_helpers import ROOT
from clusterlab.debugging.preflight import matmul_dtype
from clusterlab.debugging.preflight_report import (
    SKEW_ENV,
    clock_skews,
    ntp_offset,
    rail_peers,
    report,
    table,
)

SBATCH = ROOT / "examples" / "hello.sbatch"
PYTORCHJOB = ROOT / "examples" / "hello_pytorchjob.yaml"


def test_ntp_offset_is_within_its_bound_whatever_the_one_way_delays():
    true_offset = 0.25
    for out_s, back_s in ((0.001, 0.001), (0.0001, 0.003), (0.004, 0.0002)):
        t0 = 10.0
        t1 = t0 + out_s + true_offset  # the server's clock is ahead
        t2 = t1 + 0.0001
        t3 = t2 - true_offset + back_s
        offset, bound = ntp_offset(t0, t1, t2, t3)
        assert abs(offset - true_offset) <= bound + 1e-12
        assert bound == pytest.approx((out_s + back_s) / 2)


def test_ntp_offset_fails_when_the_timestamps_are_not_causal():
    with pytest.raises(ValueError, match="delay"):
        ntp_offset(0.0, 1.0, 2.0, 0.5)


def test_clock_skews_parse_and_reject_bad_specs():
    assert clock_skews("1=0.25, 2=-0.1") == {1: 0.25, 2: -0.1}
    assert clock_skews(None) == {} and clock_skews("") == {}
    with pytest.raises(ValueError, match=SKEW_ENV):
        clock_skews("one=0.25")
    with pytest.raises(ValueError, match="3600"):
        clock_skews("1=7200")


def _rows(flops):
    return [
        dict(rank=r, node=r // 2, host="h", matmul_flops=f, allreduce_busbw_Bps=1e9)
        for r, f in enumerate(flops)
    ]


def test_report_flags_the_slow_rank_only():
    rep = report(_rows([10e9, 9e9, 11e9, 3e9]), {1: (0.25, 0.001)}, [1e9] * 4)
    assert rep["slow_ranks"] == [3]
    assert [r["slow"] for r in rep["ranks"]] == [False, False, False, True]
    assert rep["clock_offsets_s"] == {"0": 0.0, "1": 0.25}
    assert rep["clock_error_bounds_s"]["1"] == 0.001
    assert rep["slow_nodes"] == [] and rep["slow_links"] == []


def test_report_fails_when_no_rank_is_slow_enough_to_flag():
    rep = report(_rows([10e9, 9e9, 11e9, 7e9]), {}, [1e9, 1e9, 0.2e9, 1e9])
    assert rep["slow_ranks"] == []  # 7 is within 1.5x of the median 9.5
    assert rep["slow_links"] == ["2->3"]


def _sbatch():
    text = SBATCH.read_text()
    nodes = int(re.search(r"#SBATCH --nodes=(\d+)", text).group(1))
    gpus = int(re.search(r"GPUS_PER_NODE:-(\d+)", text).group(1))
    modules = re.findall(r"^run_on_every_node (\S+)", text, re.M)
    return text, nodes, gpus, modules


def _mismatches(job, sbatch) -> list[str]:
    """What differs between the PyTorchJob and the SLURM script (empty: nothing)."""
    text, nodes, gpus, modules = sbatch
    specs = job["spec"]["pytorchReplicaSpecs"]
    problems = []
    if job["kind"] != "PyTorchJob" or set(specs) != {"Master", "Worker"}:
        problems.append("not a PyTorchJob with a Master and Workers")
    if sum(s["replicas"] for s in specs.values()) != nodes:
        problems.append("pods != the SLURM script's nodes")
    for name, spec in specs.items():
        c = spec["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in c["env"]}
        script = c["args"][0]
        if int(env["NNODES"]) != nodes or int(env["GPUS_PER_NODE"]) != gpus:
            problems.append(f"{name}: NNODES or GPUS_PER_NODE differ")
        if int(c["resources"]["limits"]["nvidia.com/gpu"]) != gpus:
            problems.append(f"{name}: GPU limit differs")
        if re.findall(r"^run_on_every_node (\S+)", script, re.M) != modules:
            problems.append(f"{name}: other steps than {modules}")
        for flag in ("--rdzv-backend c10d", "--nnodes", "--nproc-per-node"):
            if flag not in script or flag not in text:
                problems.append(f"{name}: {flag} missing")
        # one rendezvous id per job and step, the same on every node
        if '--rdzv-id "$JOB_NAME-$1"' not in script or "date" in script:
            problems.append(f"{name}: the rendezvous id is not the job's name")
        if '--rdzv-endpoint "$MASTER_ADDR:$MASTER_PORT"' not in script:
            problems.append(f"{name}: the rendezvous is not the Master's service")
    return problems


def test_the_kubernetes_job_runs_the_slurm_scripts_steps():
    sbatch = _sbatch()
    assert sbatch[3] == [
        "clusterlab.debugging.preflight",
        "clusterlab.message_passing.hello",
    ]
    assert '--rdzv-id "$SLURM_JOB_ID-$1"' in sbatch[0]
    assert _mismatches(yaml.safe_load(PYTORCHJOB.read_text()), sbatch) == []


def test_the_job_comparison_fails_when_nodes_steps_or_rendezvous_differ():
    sbatch = _sbatch()
    job = yaml.safe_load(PYTORCHJOB.read_text())
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] += 1
    assert "pods != the SLURM script's nodes" in _mismatches(job, sbatch)
    job = yaml.safe_load(PYTORCHJOB.read_text())
    worker = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    args = worker["containers"][0]["args"]
    args[0] = args[0].replace("run_on_every_node clusterlab.debugging.preflight\n", "")
    args[0] = args[0].replace("$JOB_NAME-$1", "job_$(date +%s)")
    found = _mismatches(job, sbatch)
    assert any("other steps" in p for p in found)
    assert any("rendezvous id" in p for p in found)


def test_the_table_marks_what_is_flagged():
    _table = table

    rep = report(_rows([10e9, 9e9, 11e9, 3e9]), {1: (0.25, 0.001)}, [1e9] * 4)
    lines = _table(rep).splitlines()
    assert "1.5x" in lines[0]
    assert [line.endswith("SLOW") for line in lines[2:6]] == [False] * 3 + [True]
    assert "node 1: clock offset +250.000 ms ± 1.000 ms" in lines


def test_bad_command_line_values_name_themselves():
    from clusterlab.debugging.preflight import _args

    assert _args(["--json", "x.json"]).json == "x.json"
    with pytest.raises(ValueError, match="--window-s"):
        _args(["--window-s", "0"])
    with pytest.raises(ValueError, match="--bytes"):
        _args(["--bytes", "2"])


def test_rail_peers_pair_each_local_rank_with_its_twin_on_the_next_node():
    nodes = [0] * 8 + [1] * 8 + [2] * 8
    local = list(range(8)) * 3
    pairs = rail_peers(nodes, local)
    for r, (dst, src) in enumerate(pairs):
        assert local[dst] == local[r] == local[src]  # the same rail
        assert nodes[dst] == (nodes[r] + 1) % 3 and nodes[src] == (nodes[r] - 1) % 3
    rails = {local[r] for r, (dst, _) in enumerate(pairs) if nodes[dst] != nodes[r]}
    assert rails == set(range(8))  # every NIC of every node carries traffic


def test_the_plain_ring_fails_the_rail_rule():
    """The old ring r -> r + 1 crosses nodes on one rail only: the test sees it."""
    nodes, local = [0] * 8 + [1] * 8, list(range(8)) * 2
    ring = [(r + 1) % 16 for r in range(16)]
    crossing = {local[r] for r in range(16) if nodes[ring[r]] != nodes[r]}
    assert crossing == {7} != {local[d] for d, _ in rail_peers(nodes, local)} - {None}


def test_rail_peers_on_one_node_are_its_ring_and_bad_layouts_are_refused():
    assert rail_peers([0, 0, 0], [0, 1, 2]) == [(1, 2), (2, 0), (0, 1)]
    with pytest.raises(ValueError, match="ranks per node"):
        rail_peers([0, 0, 1], [0, 1, 0])
    with pytest.raises(ValueError, match="same ones"):
        rail_peers([0, 0, 1, 1], [0, 1, 0, 2])
    with pytest.raises(ValueError, match="repeated"):
        rail_peers([0, 0], [0, 0])
    with pytest.raises(ValueError, match="one entry per rank"):
        rail_peers([0, 0], [0])


def test_report_names_the_rail_of_each_link_that_crosses_nodes():
    rows = _rows([10e9] * 4)
    for r in rows:
        r["local_rank"] = r["rank"] % 2
    links = [(2, 1e9), (3, 0.1e9), (0, 1e9), (1, 1e9)]
    rep = report(rows, {}, links)
    assert [(x["src"], x["dst"], x["rail"]) for x in rep["links"]] == [
        (0, 2, 0), (1, 3, 1), (2, 0, 0), (3, 1, 1),
    ]  # fmt: skip
    assert rep["slow_links"] == ["1->3"]
    assert "rail 1" in table(rep)


def test_the_matmul_runs_float32_on_a_cpu():
    import torch

    assert matmul_dtype(torch.device("cpu")) == torch.float32
