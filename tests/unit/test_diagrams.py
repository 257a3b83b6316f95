"""The diagrams: each names the boxes and links it should, and its labels read
the data rows and models they state (a changed row changes the label)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import clusterlab as cl
from clusterlab.checkpointing import diagram as checkpointing_diagram
from clusterlab.collectives import diagram as hardware
from clusterlab.core import diagram as _base
from clusterlab.core.theme import lean_spec
from clusterlab.data_parallel import diagram as data_parallel
from clusterlab.decide import diagram as decide_diagram
from clusterlab.economics import diagram as economics_diagram
from clusterlab.experts import diagram as experts
from clusterlab.failures import diagram as failures_diagram
from clusterlab.long_context import diagram as long_context_diagram
from clusterlab.message_passing import diagram as paradigm
from clusterlab.pipeline import diagram as model_parallel
from clusterlab.planner import diagram as planner_diagram
from clusterlab.precision import diagram as precision
from clusterlab.ring import diagram as collectives
from clusterlab.roofline import diagram as machines
from clusterlab.stragglers import diagram as at_scale
from clusterlab.tensor_parallel import diagram as tensor_parallel_diagram

rate = _base.rate_label


def _spec_bytes(chart) -> int:
    return len(json.dumps(lean_spec(chart.to_dict(validate=False))))


def test_sxm_node_names_its_parts_and_reads_its_rates():
    nodes, links = hardware.node_spec("sxm")
    ids = set(nodes["id"])
    assert {f"gpu{i}" for i in range(8)} <= ids and "nvswitch" in ids
    assert {f"nic{i}" for i in range(8)} <= ids and {"cpu0", "cpu1"} <= ids
    nvlinks = links[links["kind"] == "NVLink"]
    assert sorted(nvlinks["src"]) == sorted(f"gpu{i}" for i in range(8))
    nv = cl.published.value("gpu_specs", "nvlink_per_direction_Bps", part="H100 SXM5")
    pcie = cl.published.value(
        "interconnect_rates", "per_direction_Bps", link="PCIe 5.0 x16"
    )
    labels = set(links["label"]) - {""}
    assert labels == {rate(nv), rate(pcie), rate(hardware._rate(hardware.NDR))}
    hbm = cl.published.value("gpu_specs", "hbm_bytes", part="H100 SXM5")
    assert nodes.set_index("id").loc["gpu0", "label"].endswith(_base.size_label(hbm))


def test_pcie_node_has_bridges_in_pairs_and_no_nvswitch():
    nodes, links = hardware.node_spec("pcie")
    assert "nvswitch" not in set(nodes["id"])
    pairs = links[links["kind"] == "NVLink"][["src", "dst"]].values.tolist()
    assert pairs == [[f"gpu{i}", f"gpu{i + 1}"] for i in range(0, 8, 2)]


def test_a_node_label_fails_when_the_data_row_changes(monkeypatch):
    real = cl.published.value

    def doubled(table, column, **match):
        v = real(table, column, **match)
        return 2 * v if column == "nvlink_per_direction_Bps" else v

    nv = cl.published.value("gpu_specs", "nvlink_per_direction_Bps", part="H100 SXM5")
    monkeypatch.setattr(cl.published, "value", doubled)
    _, links = hardware.node_spec("sxm")
    assert rate(nv) not in set(links["label"])


def test_cluster_oversubscription_and_rails():
    nodes, links = hardware.cluster_spec(n_nodes=4, rails=4, spines=2)
    assert hardware.oversubscription(4, 2) == 2.0
    leaves = nodes[nodes["kind"] == "leaf"]
    assert len(leaves) == 4 and leaves["label"].str.endswith("2:1").all()
    rail = links[links["dst"] == "leaf1"]
    assert sorted(rail["src"]) == [f"n{k}r1" for k in range(4)]


def test_ring_allreduce_ends_with_every_chunk_summed_everywhere():
    states = collectives.ring_chunks(4)
    assert len(states) == 7
    after_rs = states[3]
    for r in range(4):
        assert after_rs[r][(r + 1) % 4] == {0, 1, 2, 3}
    assert all(c == {0, 1, 2, 3} for row in states[-1] for c in row)
    nodes, links, n_steps = collectives.ring_allreduce_spec(4)
    cells = nodes["id"].str.fullmatch(r"s\d+r\d+c\d+")
    last = nodes[(nodes["t0"] == n_steps - 1) & cells]
    assert set(last["label"]) == {"a+b+c+d"} and len(last) == 16
    # four sends a step; the one from GPU 3 to GPU 0 is drawn as two arrows
    assert len(links[links["t0"] == 1]) == 5


@pytest.mark.parametrize(
    "spec", [collectives.tree_allreduce_spec, collectives.nvls_allreduce_spec]
)
def test_tree_and_nvls_end_with_the_whole_sum(spec):
    nodes, _, n_steps = spec()
    last = nodes[(nodes["t0"] == n_steps - 1) & nodes["label"].str.startswith("GPU")]
    assert last["label"].str.endswith("a+b+c+d").all() and len(last) == 4


def test_space_time_stamps_are_the_simulated_clocks():
    ev = cl.clocks.logical.simulate_messages(cl.clocks.logical.LogicalParams())
    for stamps, col in (("lamport", "lamport"), ("vector", "vector")):
        nodes, links, _ = paradigm.space_time_spec(ev, stamps)
        events = nodes[nodes["id"].str.fullmatch(r"e\d+")]
        want = ev.sort_values("true_s")[col].map(
            lambda v: "".join(map(str, v)) if isinstance(v, tuple) else str(v)
        )
        assert events["label"].tolist() == want.tolist()
    assert len(links) == (ev["kind"] == "recv").sum()


def test_failure_detector_shows_a_false_suspicion_and_the_crash():
    nodes, links, _ = failures_diagram.failure_detector_spec(
        cl.failures.sim.detector_example()
    )
    kinds = set(nodes["kind"])
    assert {"false suspicion", "suspected", "crash", "heartbeat"} <= kinds


def test_zero_widths_are_the_memory_model():
    nodes = data_parallel.zero_spec(4)
    for stage in range(4):
        held = nodes[nodes["id"].str.match(rf"z{stage}r0")]["bytes_per_param"].sum()
        assert held == cl.models.memory.model_state_bytes_per_param(stage, 4)


def test_bucket_bars_agree_with_the_ddp_model():
    bars = data_parallel.bucket_bars(4)
    alpha_s, bw = data_parallel._ndr()
    want = cl.models.data_parallel.bucket_overlap_time(0.1, 1e9, 8, alpha_s, bw, 4)
    assert bars["end"].max() == pytest.approx(want["done_s"] * 1e3)


def test_pipeline_lanes_are_the_simulated_schedule():
    bars = model_parallel.pipeline_bars(4, 8, "1f1b")
    sim = cl.models.pipeline.simulate_schedule(4, 8, "1f1b")
    assert len(bars) == len(sim) and bars["end"].max() == sim["end"].max()


def test_layout_puts_tensor_ranks_on_one_node():
    nodes = planner_diagram.layout_spec(tp=4, pp=2, dp=2)
    gpus = nodes[nodes["tp_rank"] >= 0]
    assert len(gpus) == 16
    node_of = gpus["id"].str.removeprefix("gpu").astype(int) // 8
    assert (
        gpus.assign(n=node_of).groupby(["pp_rank", "dp_rank"])["n"].nunique().max() == 1
    )


def test_straggler_barrier_is_the_slowest_worker():
    bars = cl.stragglers.sim.straggler_bars(8)
    compute = bars[bars["kind"] == "compute"]
    assert bars["end"].max() == compute["end"].max()
    assert compute["end"].idxmax() == compute.index[-1]


def test_checkpoint_timeline_has_lost_work():
    bars = cl.checkpointing.sim.checkpoint_bars()
    assert {"work", "checkpoint", "lost work", "restart"} <= set(bars["kind"])


def test_moe_and_ring_attention_specs():
    nodes, links, n = experts.moe_routing_spec()
    dispatch = links[links["kind"] == "dispatch"]
    assert dispatch["dst"].tolist() == [f"e{e}" for e in experts.DEFAULT_ROUTES]
    nodes, links, n = long_context_diagram.ring_attention_spec(4)
    step1 = nodes[(nodes["t0"] == 1) & nodes["id"].str.startswith("s")]
    assert step1["label"].tolist() == ["K3,V3", "K0,V0", "K1,V1", "K2,V2"]


def test_a_link_to_a_missing_node_is_refused():
    nodes = pd.DataFrame([dict(id="a", x=0, y=0, w=1, h=1, label="", kind="k")])
    links = pd.DataFrame([dict(src="a", dst="b", label="", kind="k")])
    with pytest.raises(ValueError, match="b"):
        _base.box_diagram(nodes, links, title="t")
    with pytest.raises(ValueError, match="lacks"):
        _base.box_diagram(nodes.drop(columns="kind"), title="t")


BUILDERS = {
    "node_pair": hardware.node_pair_diagram,
    "cluster": hardware.cluster_diagram,
    "ring": collectives.ring_allreduce_diagram,
    "tree": collectives.tree_allreduce_diagram,
    "nvls": collectives.nvls_allreduce_diagram,
    "space_time": lambda: paradigm.space_time_diagram(
        cl.clocks.logical.simulate_messages(cl.clocks.logical.LogicalParams()),
        crash_process=2,
    ),
    "detector": lambda: failures_diagram.failure_detector_diagram(
        cl.failures.sim.detector_example()
    ),
    "buckets": data_parallel.bucket_overlap_diagram,
    "zero": data_parallel.zero_stages_diagram,
    "fsdp": data_parallel.fsdp_cycle_diagram,
    "tp": tensor_parallel_diagram.tensor_parallel_diagram,
    "sp": lambda: tensor_parallel_diagram.tensor_parallel_diagram(True),
    "pipeline": model_parallel.pipeline_schedules_diagram,
    "layout": planner_diagram.layout_diagram,
    "straggler": lambda: at_scale.straggler_diagram(cl.stragglers.sim.straggler_bars()),
    "checkpoints": lambda: checkpointing_diagram.checkpoint_timeline_diagram(
        cl.checkpointing.sim.checkpoint_bars()
    ),
    "decision": decide_diagram.decision_diagram,
    "moe": experts.moe_routing_diagram,
    "ring_attention": long_context_diagram.ring_attention_diagram,
    "compute_memory": machines.compute_memory_diagram,
    "capex": economics_diagram.capex_diagram,
    "format_bits": precision.format_bits_diagram,
}
STEPPED = {"ring", "tree", "nvls", "space_time", "detector", "moe", "ring_attention"}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_diagram_is_small_and_steppable_ones_have_a_slider(name):
    chart = BUILDERS[name]()
    spec = chart.to_dict(validate=False)
    assert _spec_bytes(chart) < 40_000
    params = json.dumps(spec.get("params", []))
    assert ('"input": "range"' in params) == (name in STEPPED)


def test_compute_memory_labels_are_the_data_rows():
    nodes, links = machines.compute_memory_spec("H100 SXM5")
    gpu = cl.published.row("gpu_specs", part="H100 SXM5")
    ridge = nodes.set_index("id").loc["gpu_ridge", "label"]
    assert f"{gpu['bf16_dense_flops'] / gpu['hbm_bandwidth_Bps']:.0f} FLOP" in ridge
    assert rate(gpu["hbm_bandwidth_Bps"]) in set(links["label"])


def test_capex_boxes_add_up_to_the_published_total():
    nodes = economics_diagram.capex_spec(512)
    row = cl.published.row("cluster_capex_published", n_gpus=512)
    assert nodes["usd"].sum() == pytest.approx(row["total_usd"], rel=1e-6)
    assert nodes["share"].sum() == pytest.approx(1.0)


def test_a_layout_with_context_parallelism_keeps_tp_inside_a_node():
    nodes = planner_diagram.layout_spec(tp=2, pp=2, dp=2, cp=2)
    gpus = nodes[nodes["tp_rank"] >= 0]
    assert len(gpus) == 16 and set(gpus["cp_rank"]) == {0, 1}
    assert gpus["label"].str.contains("c1").any()
    with pytest.raises(ValueError, match="multiple"):
        planner_diagram.layout_spec(tp=3, pp=1, dp=1)


# ------------------------------------------------- what a reader sees on the page
#: The widest a picture may be and still fit the book's text column (688 px in
#: a 1280 px window; the site test measures the real column).
PAGE_WIDTH_PX = 688


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_diagram_fits_the_width_of_the_page(name):
    import re

    vl_convert = pytest.importorskip("vl_convert")
    svg = vl_convert.vegalite_to_svg(lean_spec(BUILDERS[name]().to_dict()))
    width = float(re.search(r'width="([0-9.]+)"', svg).group(1))
    assert width <= PAGE_WIDTH_PX, f"{name} is {width:.0f} px wide"


def test_the_link_rates_chart_and_its_legend_fit_the_page():
    import re

    vl_convert = pytest.importorskip("vl_convert")
    chart = cl.collectives.chart.link_rates_chart(
        cl.published.load("interconnect_rates")
    )
    svg = vl_convert.vegalite_to_svg(lean_spec(chart.to_dict()))
    assert float(re.search(r'width="([0-9.]+)"', svg).group(1)) <= PAGE_WIDTH_PX


def test_the_busbw_size_chart_fits_the_page_with_its_legends():
    import re

    vl_convert = pytest.importorskip("vl_convert")
    systems = ["8xH200-NVLS-nccl2.27.7", "8xA100-nccltests", "8xH100-scalingbook"]
    sweep = cl.models.allreduce_sweeps.busbw_size_sweep(systems)
    spec = lean_spec(cl.collectives.chart.busbw_size_chart(sweep).to_dict())
    svg = vl_convert.vegalite_to_svg(spec)
    assert float(re.search(r'width="([0-9.]+)"', svg).group(1)) <= PAGE_WIDTH_PX


def _crosses(seg, box, margin=0.3):
    """Whether segment ``seg`` enters the inside of ``box`` (x, y, w, h)."""
    (x1, y1, x2, y2), (bx, by, bw, bh) = seg, box
    lo_x, hi_x, lo_y, hi_y = (
        bx + margin,
        bx + bw - margin,
        by + margin,
        by + bh - margin,
    )
    for k in range(1, 200):  # sample the segment; boxes are far wider than a step
        t = k / 200
        x, y = x1 + t * (x2 - x1), y1 + t * (y2 - y1)
        if lo_x < x < hi_x and lo_y < y < hi_y:
            return True
    return False


def _inside(a, b) -> bool:
    return (
        a.x >= b.x and a.y >= b.y and a.x + a.w <= b.x + b.w and a.y + a.h <= b.y + b.h
    )


def _label_box(b, px_per_x, px_per_y, font_px):
    """The rectangle a box's label covers, in the diagram's units."""
    lines = str(b.label).split("\n")
    half_w = max(len(t) for t in lines) * 0.55 * font_px / px_per_x / 2
    half_h = len(lines) * 1.2 * font_px / px_per_y / 2
    cx, cy = b.x + b.w / 2, b.y + b.h / 2
    return (cx - half_w, cy - half_h, 2 * half_w, 2 * half_h)


@pytest.mark.parametrize(
    "spec, size",
    [("cluster", (620, 280)), ("sxm", (600, 230)), ("pcie", (600, 230))],
)
def test_no_link_runs_through_a_label_of_a_box_it_does_not_join(spec, size):
    if spec == "cluster":
        nodes, links = hardware.cluster_spec()
    else:
        nodes, links = hardware.node_spec(spec)
    geo = _base.link_geometry(nodes, links)
    boxes = nodes.drop_duplicates("id").set_index("id")
    px_x = size[0] / (float((boxes.x + boxes.w).max()) * 1.06)
    px_y = size[1] / (float((boxes.y + boxes.h).max()) * 1.02)
    for r in geo.itertuples():
        for name, b in boxes.iterrows():
            if name in (r.src, r.dst) or not str(b.label).strip():
                continue
            seg = (r.x1, r.y1, r.x2, r.y2)
            label = _label_box(b, px_x, px_y, 10)
            assert not _crosses(seg, label, margin=0.0), (r.src, r.dst, name)


def test_a_diagonal_link_leaves_its_source_at_the_edge_not_through_its_label():
    nodes = pd.DataFrame(
        [dict(id="a", x=0, y=0, w=10, h=4, label="a", kind="k"),
         dict(id="b", x=30, y=20, w=10, h=4, label="b", kind="k")]
    )  # fmt: skip
    links = pd.DataFrame([dict(src="a", dst="b", label="", kind="k")])
    g = _base.link_geometry(nodes, links).iloc[0]
    assert (g.x1, g.y1) == (5, 4)  # the middle of a's bottom edge, not its label
    assert g.x2 == pytest.approx(30) or g.y2 == pytest.approx(20)  # on b's edge


def test_a_label_of_several_lines_is_centred_in_its_box():
    nodes = pd.DataFrame(
        [dict(id="a", x=0, y=0, w=10, h=10, label="one\ntwo\nthree", kind="k"),
         dict(id="b", x=20, y=0, w=10, h=10, label="one", kind="k")]
    )  # fmt: skip
    spec = _base.box_diagram(nodes, title="t", size=(300, 100)).to_dict()
    rows = next(iter(spec["datasets"].values()))
    ty = {r["id"]: r["ty"] for r in rows}
    assert ty["b"] == pytest.approx(5.0)
    assert ty["a"] < 5.0  # lifted by one line of three, so the block is centred


def test_the_moe_diagram_shows_the_routers_choice_at_step_0():
    nodes, links, n = experts.moe_routing_spec()
    at0 = links[(links["t0"] <= 0) & (0 < links["t1"])]
    assert set(at0["dst"]) == {"router"} and len(at0) == len(experts.DEFAULT_ROUTES)
    shown = nodes[(nodes["t0"] <= 0) & (0 < nodes["t1"])]
    assert "router" in set(shown["id"])
