"""DDP's buckets across a slow link: the bucket model with DDP's own bucket sizes,
the prediction from the link's own timings, and the check that decides the
claim, fed the recorded run and wrong models."""

from __future__ import annotations

import pandas as pd
import pytest

from clusterlab.data_parallel import check, overlap
from clusterlab.models.data_parallel import bucket_overlap_time

MIB = 2**20


def sweep(exposed_ms, buckets=(4, 3, 2, 1), allreduce_s=0.25, backward_s=0.25):
    sizes = {4: [2] * 4, 3: [3, 3, 2], 2: [5, 3], 1: [8]}
    return pd.DataFrame(
        {
            "cap_mib": [1.01, 2.01, 4.01, 64.0][: len(buckets)],
            "buckets": list(buckets),
            "bucket_bytes": [" ".join(str(s * MIB) for s in sizes[b]) for b in buckets],
            "grad_bytes": 8 * MIB,
            "backward_alone_s": backward_s,
            "backward_s": [backward_s + e / 1e3 for e in exposed_ms],
            "exposed_s": [e / 1e3 for e in exposed_ms],
            "allreduce_s": allreduce_s,
            "tiny_allreduce_s": 0.0004,
            "rate_mbit": 300.0,
        }
    )


def test_one_bucket_exposes_the_whole_all_reduce_as_the_link_timed_it():
    got = overlap.predicted(sweep([60, 80, 140, 250]))
    one = got[got["buckets"] == 1].iloc[0]
    assert one["model_exposed_s"] == pytest.approx(0.25, rel=1e-9)
    assert one["model_comm_s"] == pytest.approx(0.25, rel=1e-9)
    # more buckets start during the backward pass: less shows
    assert got["model_exposed_s"].is_monotonic_increasing


def test_unequal_buckets_are_ready_when_their_share_of_the_gradients_is():
    # 5 MiB then 3 MiB: the first is ready at 5/8 of the backward pass
    t = bucket_overlap_time(0.8, 8.0, 2, 0.0, 1.0, 2, bucket_bytes=[5.0, 3.0])
    assert t["done_s"] == pytest.approx(0.5 + 5.0 + 3.0)
    equal = bucket_overlap_time(0.8, 8.0, 2, 0.0, 1.0, 2)
    assert equal["done_s"] == pytest.approx(0.4 + 4.0 + 4.0)
    with pytest.raises(ValueError, match="add up to grad_bytes=8"):
        bucket_overlap_time(0.8, 8.0, 2, 0.0, 1.0, 2, bucket_bytes=[5.0, 2.0])
    with pytest.raises(ValueError, match=r"bucket_bytes\[1\]"):
        bucket_overlap_time(0.8, 8.0, 2, 0.0, 1.0, 2, bucket_bytes=[9.0, -1.0])


def test_the_recorded_sweep_passes_its_check():
    table = overlap.predicted(overlap.recorded())
    assert table["buckets"].tolist() == [4, 3, 2, 1]
    assert check.overlap_matches_buckets(table)["status"] == "pass"


def test_a_model_that_hides_nothing_or_everything_fails_the_check():
    table = overlap.predicted(overlap.recorded())
    hides_nothing = table.assign(model_exposed_s=table["model_comm_s"])
    verdict = check.overlap_matches_buckets(hides_nothing)
    assert verdict["status"] == "miss", verdict["text"]
    hides_all = table.assign(model_exposed_s=0.0)
    verdict = check.overlap_matches_buckets(hides_all)
    assert verdict["status"] == "miss", verdict["text"]


def test_a_run_whose_buckets_hid_nothing_fails_the_check():
    # a fast link's shape, or buckets sent only after the backward pass
    table = overlap.predicted(sweep([250, 250, 250, 250]))
    verdict = check.overlap_matches_buckets(table)
    assert verdict["status"] == "miss" and "4 buckets hide 0.00" in verdict["text"]


def test_bad_tables_and_arguments_are_named():
    with pytest.raises(ValueError, match="lacks"):
        check.overlap_matches_buckets(pd.DataFrame({"buckets": [1, 2]}))
    one = overlap.predicted(sweep([250], buckets=(1,)))
    with pytest.raises(ValueError, match="one bucket count"):
        check.overlap_matches_buckets(one)
    with pytest.raises(ValueError, match="rate_mbit"):
        overlap.bucket_sweep_across_nodes(5.0)
    with pytest.raises(ValueError, match=r"caps_mib\[1\]"):
        overlap.bucket_sweep_across_nodes(300.0, caps_mib=(1.0, 0.0))


def test_where_nodes_cannot_be_emulated_the_recorded_run_is_shown(monkeypatch):
    import clusterlab.cluster.support as support

    monkeypatch.setattr(support, "why_not", lambda: "This machine is not root.")
    table, note = overlap.measure_or_recorded()
    assert note.startswith("This machine is not root. Shown instead: the book's run")
    assert "scripts/record_cluster_runs.py --overlap-only" in note
    assert table.attrs["note"] == note
    assert overlap.predicted(table).attrs["note"] == note  # the lab prints it
    with pytest.raises(RuntimeError, match="not root"):
        overlap.bucket_sweep_across_nodes()


def test_the_chart_draws_the_measured_dots_against_the_model_and_stays_small():
    import json

    from clusterlab.data_parallel.chart import overlap_chart

    spec = overlap_chart(overlap.predicted(overlap.recorded())).to_dict()
    assert len(json.dumps(spec)) < 50_000
    assert [layer["mark"]["type"] for layer in spec["layer"]] == ["line", "point"]
    with pytest.raises(ValueError, match="model_exposed_s"):
        overlap_chart(overlap.recorded())


def test_one_rule_picks_the_measured_or_the_recorded_table(monkeypatch):
    import clusterlab.cluster.support as support
    from clusterlab.cluster.recorded import MEASURED_HERE, here_or_recorded

    here = pd.DataFrame({"x": [1]})
    kept = pd.DataFrame({"x": [2], "machine": ["m"], "date": ["d"], "command": ["c"]})
    monkeypatch.setattr(support, "why_not", lambda: None)
    assert here_or_recorded(lambda: here, lambda: kept) == (here, MEASURED_HERE)
    monkeypatch.setattr(support, "why_not", lambda: "No root here.")
    table, note = here_or_recorded(lambda: 1 / 0, lambda: kept)
    assert table is kept and note.startswith("No root here. Shown instead")
    assert "recorded on m on d with `c`" in note
