"""The published tables in data/: columns, units in names, positive values, sources."""

import re
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
TABLES = {
    "gpu_specs": ["part", "bf16_dense_flops", "hbm_bandwidth_Bps", "tdp_W"],
    "interconnect_rates": [
        "link",
        "per_direction_Bps",
        "both_directions_Bps",
        "quoted_direction",
    ],
    "collective_busbw_published": [
        "system",
        "gpu",
        "n_gpus",
        "n_nodes",
        "gpus_per_node",
        "fabric",
        "algorithm",
        "nccl_version",
        "op",
        "size_bytes",
        "busbw_Bps",
    ],
    "link_assumptions": ["link", "rate_link", "attachment", "alpha_s"],
    "step_assumptions": ["quantity", "value_fraction"],
    "matmul_achieved": ["part", "peak_flops", "achieved_flops"],
    "failures_published": ["run", "n_gpus", "duration_s", "unexpected_interruptions"],
    "prices": ["item", "what", "where", "usd", "per", "conditions"],
    "power": ["item", "what", "hardware", "W", "conditions"],
    "economics_assumptions": ["item", "what", "value", "unit", "conditions"],
    "cluster_capex_published": ["n_nodes", "n_gpus", "switches", "total_usd"],
    "cpu_core": ["item", "peak_flops", "bandwidth_Bps", "conditions"],
    "moe_configs": [
        "model",
        "n_layers",
        "hidden",
        "n_experts",
        "top_k",
        "n_shared_experts",
        "expert_ffn_hidden",
        "params_total",
        "params_active",
    ],
    "parallel_layouts_published": [
        "layout",
        "model",
        "gpu",
        "n_gpus",
        "gpus_per_node",
        "tp",
        "pp",
        "dp",
        "cp",
        "ep",
        "zero_stage",
    ],
    "fp8_training_published": [
        "run",
        "model",
        "precision",
        "n_gpus",
        "tp",
        "pp",
        "cp",
        "dp",
        "zero_stage",
        "tokens_per_gpu_per_s",
    ],
    "cluster_runs": ["experiment", "nodes", "rate_mbit", "size_mib", "seconds"],
    "serving_models": ["model", "n_layers", "n_heads", "params_total"],
    "interruption_causes_published": ["run", "component", "category", "interruptions"],
    "heartbeat_runs": [
        "timeout_ms",
        "interval_ms",
        "loss_percent",
        "sent",
        "delivered",
        "false_alarms",
    ],  # fmt: skip
    "torchft_cut_runs": [
        "timeout_s",
        "heartbeat_s",
        "cut_s",
        "stall_s",
        "back_s",
        "restarts",
        "healed_from",
        "steps",
    ],  # fmt: skip
    "overlap_runs": [
        "cap_mib",
        "buckets",
        "bucket_bytes",
        "grad_bytes",
        "backward_alone_s",
        "backward_s",
        "exposed_s",
        "allreduce_s",
        "tiny_allreduce_s",
        "rate_mbit",
    ],  # fmt: skip
}
#: Endings that name a unit; every numeric column but counts must carry one.
UNIT_SUFFIXES = ("_Bps", "_flops", "_bytes", "_W", "_s", "_fraction", "_usd", "_ratio")
#: Columns that are a unit themselves, or whose unit is in a ``unit`` or ``per`` column.
UNIT_NAMES = {"usd", "W", "pue", "value"}
COUNTS = {"n_gpus", "n_nodes", "gpus_per_node"}
COUNTS |= {"interruptions", "planned_interruptions", "unexpected_interruptions"}
COUNTS |= {"switch_layers", "switches"}
COUNTS |= {"n_layers", "n_moe_layers", "hidden", "n_experts", "top_k"}
COUNTS |= {"n_shared_experts", "expert_ffn_hidden", "params_total", "params_active"}
COUNTS |= {"max_nodes_per_token", "training_ep"}
COUNTS |= {"tp", "pp", "dp", "cp", "ep", "zero_stage", "micro_batch", "global_batch"}
COUNTS |= {"seq_len", "n_heads", "vocab"}
UNIT_NAMES |= {"gpu_hours_per_trillion_tokens"}  # its name is its unit
# The recorded runs across emulated nodes: link rates in Mbit/s, sizes in MiB.
UNIT_SUFFIXES += ("_mbit", "_mib", "_GBps")
UNIT_NAMES |= {"seconds"}
COUNTS |= {"nodes", "ranks_per_node", "rep"}
COUNTS |= {"n_kv_heads", "head_dim", "kv_latent_dim"}  # serving_models
# The recorded heartbeats across a lossy link: milliseconds, percent, counts.
UNIT_SUFFIXES += ("_ms", "_percent")
COUNTS |= {"sent", "delivered", "false_alarms"}
COUNTS |= {"buckets"}  # the recorded DDP sweep across a slow link
COUNTS |= {"restarts", "steps"}  # the recorded torchft cuts
# The published bf16/fp8 training pairs: FFN width, memory in GiB as printed.
COUNTS |= {"ffn_hidden"}
UNIT_SUFFIXES += ("_gib",)
#: Counts that may be zero (a model with no shared expert; the first repetition).
ZERO_ALLOWED = {"n_shared_experts", "rep", "restarts"}


def test_every_table_of_data_is_checked_here_and_described_in_its_readme():
    csvs = {p.stem for p in (ROOT / "data").glob("*.csv")}
    assert csvs == set(TABLES), csvs ^ set(TABLES)
    readme = (ROOT / "data" / "README.md").read_text(encoding="utf-8")
    missing = [n for n in sorted(csvs) if f"| `{n}.csv` |" not in readme]
    assert not missing, f"data/README.md does not describe {missing}"


def _load(name):
    return pd.read_csv(ROOT / "data" / f"{name}.csv")


@pytest.mark.parametrize("name", TABLES)
def test_table_has_its_columns_and_sources(name):
    df = _load(name)
    assert set(TABLES[name]) <= set(df.columns)
    for col in ("source", "source_key", "source_date"):
        assert col in df.columns, f"{name} lacks {col}"
        assert df[col].notna().all() and (df[col].astype(str).str.len() > 0).all()
    assert df["source_key"].str.fullmatch(r"[a-z][a-z0-9_]*").all()
    assert df["source_date"].astype(str).str.fullmatch(r"(19|20)\d\d(-\d\d)?").all()


@pytest.mark.parametrize("name", TABLES)
def test_numbers_carry_units_and_are_positive(name):
    df = _load(name)
    numeric = [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c])]
    numeric = [c for c in numeric if c != "source_date"]
    assert numeric, f"{name} has no numeric column"
    for col in numeric:
        unit = col in COUNTS or col in UNIT_NAMES or col.endswith(UNIT_SUFFIXES)
        assert unit, f"{name}.{col}: unit in name?"
        values = df[col].dropna()
        floor_ok = (values >= 0) if col in ZERO_ALLOWED else (values > 0)
        assert floor_ok.all(), f"{name}.{col} has a value <= 0"


def test_every_source_key_is_cited_or_listed_for_the_bibliography():
    keys = set()
    for name in TABLES:
        keys |= set(_load(name)["source_key"])
    bib = (ROOT / "references.bib").read_text()
    known = set(re.findall(r"@\w+\{(\w+),", bib))
    pending = {  # keys whose BibTeX entries are being added to references.bib
        "scaling_book",
        "bekman_mle",
        "nvidia_h200",
        "nvidia_a100",
        "nvidia_dgx_h100",
        "aws_p5",
        "ieee8023ba",
    }
    # "assumption" marks a row whose source says "assumption: why", with no paper;
    # "recorded" a run the book made itself (its machine, date and command in the row)
    own = {"assumption", "recorded"}
    assert keys <= known | pending | own, keys - known - pending


def test_assumption_rows_say_so_and_why():
    for name in ("link_assumptions", "step_assumptions"):
        df = _load(name)
        own = df[df["source_key"] == "assumption"]
        assert own["source"].str.startswith("assumption: ").all()
        derived = df["source"].str.startswith(("assumption: ", "efficiency derived"))
        assert derived.all(), df.loc[~derived, "source"]
    links = _load("link_assumptions")
    rates = set(_load("interconnect_rates")["link"])
    assert set(links["rate_link"]) <= rates
    # each efficiency is typed once or derived from one published system
    typed = links["efficiency_fraction"].notna()
    from_system = links["efficiency_from_system"].notna()
    assert (typed ^ from_system).all()
    assert links.loc[typed, "efficiency_fraction"].between(0.05, 1.0).all()
    assert set(links["attachment"]) <= {"per_gpu", "per_port"}


def test_both_directions_is_twice_per_direction():
    df = _load("interconnect_rates")
    ratio = df["both_directions_Bps"] / df["per_direction_Bps"]
    assert ratio.round(6).eq(2.0).all()
    nvlink4 = df[df["link"].str.startswith("NVLink 4")].iloc[0]
    assert nvlink4["both_directions_Bps"] == 900e9  # the datasheet's 900 GB/s
    assert nvlink4["per_direction_Bps"] == 450e9
    nvlink5 = df[df["link"].str.startswith("NVLink 5")]
    assert (nvlink5["both_directions_Bps"] == 1.8e12).all()  # 1.8 TB/s both ways
    xdr = df[df["link"].str.startswith("InfiniBand XDR")].iloc[0]
    assert xdr["per_direction_Bps"] == 800e9 / 8  # one 800 Gb/s ConnectX-8 port


def test_specs_are_in_plausible_ranges():
    specs = _load("gpu_specs").set_index("part")
    # a cell the sources give no figure for is empty (B300 and GB300 state only HBM)
    flops, hbm_Bps = specs["bf16_dense_flops"].dropna(), specs["hbm_bandwidth_Bps"]
    assert flops.between(1e14, 1e16).all()  # 100 TFLOP/s–10 PFLOP/s
    assert hbm_Bps.dropna().between(1e12, 1e13).all()  # 1–10 TB/s
    assert specs["hbm_bytes"].notna().all()
    empty = specs[specs[["bf16_dense_flops", "hbm_bandwidth_Bps"]].isna().any(axis=1)]
    assert empty["source"].str.contains("left empty").all(), empty.index
    assert specs.at["H100 SXM5", "hbm_bandwidth_Bps"] == 3.35e12
    # the PCIe part has the slower memory (claim S4)
    assert (
        specs.at["H100 PCIe", "hbm_bandwidth_Bps"]
        < specs.at["H100 SXM5", "hbm_bandwidth_Bps"]
    )
    got = _load("matmul_achieved")
    assert (got["achieved_flops"] < got["peak_flops"]).all()


def test_published_busbw_is_a_fraction_of_the_link_or_near_it():
    df = _load("collective_busbw_published")
    share = df["busbw_Bps"] / df["link_per_direction_Bps"]
    # above 1 only with in-switch reduction (NVLink SHARP), and never wildly
    assert share.between(0.0, 1.1).all(), share
    assert (share[df["algorithm"] != "NVLS"] <= 1.0).all()
    assert set(df["op"]) <= {
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "broadcast",
        "peer_copy",
    }
    assert set(df["algorithm"]) <= {
        "NVLS",
        "NVLSTree",
        "ring",
        "unknown",
        "copy engine",
    }


def test_published_busbw_rows_state_their_conditions():
    df = _load("collective_busbw_published")
    ar = df[df["op"] == "all_reduce"]
    # every all-reduce states its size, or says its source does not (GB200 NVL72)
    unsized = ar[ar["size_bytes"].isna()]
    assert unsized["source"].str.contains("size not stated").all()
    assert set(unsized["system"]) == {"72xGB200-NVL72-NVLS-nvidia"}
    ar = ar.dropna(subset=["size_bytes"])
    assert (df["n_gpus"] <= df["n_nodes"] * df["gpus_per_node"]).all()
    # one figure per system and size
    assert not ar.duplicated(["system", "size_bytes"]).any()
    by = ar.set_index(["system", "size_bytes"])["busbw_Bps"]
    assert by["8xH200-NVLS-nccl2.27.7", 2**34] == 482.26e9  # 16 GiB, NVLS
    assert by["8xH200-ring-nccl2.27.7", 2**34] == 367.61e9  # NCCL_NVLS_ENABLE=0
    assert by["8xB200-NVLS-nccl2.27.7", 2**33] == 838.0e9  # 8 GiB, NVLS
    assert by["8xB200-ring-nccl2.27.7", 2**33] == 682.2e9  # NCCL_NVLS_ENABLE=0
    efa = ar[ar["system"] == "32xH200-EFA-ring-nccl2.27.7"].iloc[0]
    assert "EFA" in efa["fabric"] and efa["size_bytes"] == 4 * 2**30
    # NCCL logs ring up to 1 MiB and NVLS from 2 MiB on the 8 x H200 sweep
    sweep = ar[ar["system"] == "8xH200-NVLS-nccl2.27.7"]
    assert set(sweep.loc[sweep["size_bytes"] <= 2**20, "algorithm"]) == {"ring"}
    assert set(sweep.loc[sweep["size_bytes"] >= 2**21, "algorithm"]) == {"NVLS"}


def test_the_causes_of_llama_3s_interruptions_add_up_to_its_count():
    causes = _load("interruption_causes_published")
    total = _load("failures_published").set_index("run")["unexpected_interruptions"]
    by_run = causes.groupby("run")["interruptions"].sum()
    for run, n in by_run.items():
        assert n == total[run], f"{run}: causes add up to {n}, not {total[run]}"
    # as printed: every share but one is its count over 419; the Faulty GPU row's
    # 30.1% is not (148 / 419 is 35.3%), which the chapter says
    share = causes["interruptions"] / by_run[causes["run"]].to_numpy()
    off = causes[(share - causes["published_share_fraction"]).abs() > 0.0006]
    assert off["component"].tolist() == ["Faulty GPU"]
