"""bench_collective: argument checks, nccl-tests' factors, and real measurements."""

import pytest

import clusterlab as cl


@pytest.mark.parametrize(
    ("op", "n", "factor"),
    [
        ("all_reduce", 2, 1.0),
        ("all_reduce", 4, 1.5),
        ("all_reduce", 8, 1.75),
        ("all_gather", 4, 0.75),
        ("reduce_scatter", 8, 0.875),
        ("broadcast", 8, 1.0),
    ],
)
def test_busbw_factors_follow_nccl_tests(op, n, factor):
    assert cl.core.bench.busbw_factor(op, n) == pytest.approx(factor)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"op": "allreduce"}, "op='allreduce' is not allowed"),
        ({"sizes": [2]}, "sizes[0]=2 is out of range"),
        ({"sizes": [2**32]}, "sizes[0]=4294967296 is out of range"),
        ({"sizes": [1.5]}, "sizes[0]=1.5 must be an integer"),
        ({"sizes": []}, "sizes=[] must hold at least one"),
        ({"world_size": 0}, "world_size=0"),
        (
            {"op": "ping_pong", "world_size": 3},
            "world_size=3 is not allowed for op='ping_pong'",
        ),
        ({"iters": 0}, "iters=0"),
        ({"warmup": -1}, "warmup=-1"),
        ({"repeats": 0}, "repeats=0"),
        ({"backend": "mpi"}, "backend='mpi'"),
    ],
)
def test_bad_arguments_are_named(kwargs, needle):
    args = {"op": "all_reduce", "sizes": [1024], "world_size": 2, **kwargs}
    with pytest.raises(ValueError) as info:
        cl.core.bench.bench_collective(**args)
    assert needle in str(info.value)


@pytest.mark.dist
@pytest.mark.parametrize(
    "op", ["all_reduce", "all_gather", "reduce_scatter", "broadcast"]
)
def test_every_op_measures_on_gloo(op):
    df = cl.core.bench.bench_collective(
        op, [64, 2**16], world_size=3, iters=5, warmup=1
    )
    assert list(df.columns[:7]) == [
        "op",
        "size_bytes",
        "world_size",
        "backend",
        "time_s",
        "algbw_Bps",
        "busbw_Bps",
    ]
    assert (df["time_s"] > 0).all() and (df["backend"] == "gloo").all()
    assert (df["size_bytes"] % (4 * 3) == 0).all() or op in ("all_reduce", "broadcast")
    ratio = df["busbw_Bps"] / df["algbw_Bps"]
    assert ratio.round(6).eq(round(cl.core.bench.busbw_factor(op, 3), 6)).all()


@pytest.mark.timing
@pytest.mark.dist
def test_bench_agrees_with_a_plain_timing_loop():
    """Best of five against a hand-written loop in the same group: within 2x.

    A 4 MiB all-reduce is bandwidth-bound, so scheduling noise on a busy 2-core
    machine is small beside it; the bound still catches a missing barrier, a
    wrong iteration count or a bytes-versus-elements mix-up (each a >2x error).
    ``bench_vs_plain_loop`` interleaves the two in one group and keeps the
    slowest rank's best round of each.
    """
    out = cl.core.bench.bench_vs_plain_loop(
        size_bytes=2**22, world_size=2, iters=10, rounds=5
    )
    assert set(out) == {"plain_s", "bench_s", "bench_over_plain"}
    assert out["plain_s"] > 0 and out["bench_s"] > 0
    plain, bench = out["plain_s"], out["bench_s"]
    assert 0.5 < bench / plain < 2.0, (plain, bench)


@pytest.mark.timing
@pytest.mark.dist
def test_ping_pong_time_grows_with_size():
    # 32 MiB takes about 40x as long as 4 bytes on two quiet cores (0.49 ms
    # against 18.8 ms here); the test is marked timing, so it runs alone.
    df = cl.core.bench.bench_collective("ping_pong", [4, 2**25], world_size=2)
    small, large = df["time_s"]
    assert large / small > 5, (small, large)


def _sleepy(rank, world_size, iters):
    import time

    calls = []

    def step():
        calls.append(1)
        time.sleep(0.01 * (rank + 1))

    best = cl.core.bench.time_in_group(step, iters=iters, repeats=2, warmup=1)
    return best, len(calls)


@pytest.mark.dist
def test_time_in_group_gives_seconds_per_call_after_a_warm_up():
    per_rank = cl.launch(_sleepy, 2, iters=3)
    for rank, (best, calls) in enumerate(per_rank):
        assert calls == 1 + 2 * 3  # one warm-up call, two blocks of three
        assert 0.01 * (rank + 1) <= best < 0.01 * (rank + 1) + 0.05, (rank, best)


@pytest.mark.dist
@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"iters": 0}, "iters=0"),
        ({"repeats": 0}, "repeats=0"),
        ({"warmup": -1}, "warmup=-1"),
    ],
)
def test_time_in_group_names_a_bad_argument(kwargs, needle):
    def bad(rank, world_size):
        try:
            cl.core.bench.time_in_group(lambda: None, **kwargs)
        except ValueError as err:
            return str(err)
        return "no error"

    assert needle in cl.launch(bad, 1)[0]
