"""Lab 04's two figures on real gloo groups: benchmark vs plain loop, held-out fit.

On a two-core machine bench/plain lands between about 0.8 and 1.3 and the
held-out median error between about 8% and 32%; the bounds here are wider, to
survive a loaded machine, but not a wrong iteration count or a wrong model.
That the two agree is tested in ``tests/unit/test_bench_collective.py``.
"""

import pandas as pd
import pytest

import clusterlab as cl

pytestmark = pytest.mark.dist


def test_plain_loop_comparison_catches_a_skewed_benchmark(monkeypatch):
    """A benchmark that forgot to divide by its iteration count would fail.

    That error is a factor of ``iters`` (10 here); bench/plain swings about
    0.5-2x on a loaded two-core machine, so 10x lands well beyond the 2x
    agreement bound; it is asked to exceed 2.5x.
    """
    from clusterlab.perf import collectives

    real = collectives._bench_worker

    def not_divided(*args, **kwargs):
        out = real(*args, **kwargs)
        out["time_s"] = [t * kwargs["iters"] for t in out["time_s"]]
        return out

    monkeypatch.setattr(collectives, "_bench_worker", not_divided)
    out = cl.perf.bench_vs_plain_loop(
        size_bytes=2**22, world_size=2, iters=10, rounds=3
    )
    assert out["bench_over_plain"] > 2.5, out


def test_alpha_beta_fit_predicts_held_out_sizes(no_leftover_processes):
    sizes = [2**k for k in range(8, 23)]
    runs = [cl.perf.bench_collective("all_reduce", sizes, 2, iters=5) for _ in range(3)]
    best = pd.concat(runs).sort_values("time_s").drop_duplicates("size_bytes")
    held = cl.perf.alpha_beta_holdout(best)
    assert len(held) == 7
    # median held-out error below 100% (a 2x miss); a fit that ignored alpha or
    # beta, or swapped them, misses small or large sizes by orders of magnitude
    assert held["rel_error"].median() < 1.0, held
    assert held.attrs["alpha_s"] > 0 and held.attrs["beta_Bps"] > 1e6


def test_bench_vs_plain_checks_its_arguments():
    with pytest.raises(ValueError, match="world_size=1"):
        cl.perf.bench_vs_plain_loop(world_size=1)
    with pytest.raises(ValueError, match="rounds=0"):
        cl.perf.bench_vs_plain_loop(rounds=0)
