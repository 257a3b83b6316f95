"""The one busy-machine helper: each verdict's path, its messages, and wrong inputs."""

import pytest

from clusterlab.core import busy
from clusterlab.core.busy import load_note, ratio_judge, retry

NOTE = "load average 7.0 on 2 cores: busy"


@pytest.fixture(autouse=True)
def fixed_load(monkeypatch):
    """A known load note, so a test can find it in the messages."""
    monkeypatch.setattr(busy, "load_note", lambda: NOTE)


def _run(verdicts, **kw):
    """``retry`` of a judge that says ``verdicts`` in turn: (outcome, calls, said)."""
    calls, said = [], []
    script = iter(verdicts)

    def measure(*args):
        calls.append(args)
        return len(calls)

    kw.setdefault("what", "the claim")
    kw.setdefault("hint", "look at the model's bandwidth")
    done = retry(
        measure,
        lambda r: (next(script), f"run {r} said so"),
        say=said.append,
        **kw,
    )
    return done, calls, said


def test_a_pass_on_the_first_try_says_nothing_and_returns_the_result():
    done, calls, said = _run(["pass"])
    assert (done.verdict, done.result, done.tries, done.decided) == ("pass", 1, 1, True)
    assert done.text == "run 1 said so" and done.judged == ("pass", "run 1 said so")
    assert len(calls) == 1 and said == []


def test_a_miss_is_said_with_the_load_and_measured_again():
    done, calls, said = _run(["miss", "pass"])
    assert done.verdict == "pass" and done.tries == 2 and len(calls) == 2
    assert said[0] == (
        f"try 1 of 3: run 1 said so: outside the bound. The machine may have been "
        f"busy ({NOTE}); measuring again."
    )
    assert said[1] == "try 2 of 3: run 2 said so: passed"


def test_a_judge_that_always_misses_fails_on_every_try_with_the_hint():
    calls = []

    def wrong_model_judge(r):  # a model 4x off misses however often it is measured
        calls.append(r)
        return "miss", f"ratio {4.0 + r:.1f} (allowed 0.5-2.5)"

    said = []
    with pytest.raises(AssertionError) as err:
        retry(
            lambda: len(calls),
            wrong_model_judge,
            what="the ring model",
            hint="look at the model's bandwidth",
            say=said.append,
        )
    msg = str(err.value)
    assert msg.startswith("the ring model: missed on all 3 tries")
    assert "ratio 4.0" in msg and "ratio 6.0" in msg and NOTE in msg
    assert msg.endswith("look at the model's bandwidth")
    assert len(calls) == 3 and len(said) == 2
    assert all("measuring again" in line for line in said)


def test_one_try_that_misses_says_so_in_the_singular():
    with pytest.raises(AssertionError, match="missed on its only try"):
        _run(["miss"], tries=1)


def test_a_busy_machine_ends_undecided_in_words_without_raising():
    done, calls, said = _run(["busy", "busy", "busy"])
    assert done.verdict == "busy" and not done.decided and done.tries == 3
    assert done.result == 3 and len(calls) == 3
    assert said[0].startswith(f"try 1 of 3: this machine was busy ({NOTE}): run 1")
    assert said[0].endswith("measuring again.")
    assert said[-1].startswith("undecided after 3 tries: run 3 said so.")
    assert NOTE in said[-1] and "quieter machine" in said[-1]


def test_undecided_says_what_the_caller_makes_of_it():
    done, _, said = _run(["busy"], tries=1, undecided="the next check still decides")
    assert done.verdict == "busy" and said[-1].endswith("the next check still decides.")


def test_the_last_verdict_decides_a_mixed_run():
    done, _, said = _run(["miss", "miss", "busy"])
    assert done.verdict == "busy" and "undecided" in said[-1]
    with pytest.raises(AssertionError, match="missed on the last of 3 tries"):
        _run(["busy", "busy", "miss"])
    done, _, _ = _run(["busy", "miss", "pass"])
    assert done.verdict == "pass" and done.tries == 3


def test_wrong_raises_at_once_without_measuring_again():
    with pytest.raises(AssertionError) as err:
        _run(["miss", "wrong", "pass"])
    msg = str(err.value)
    assert msg.startswith("the claim: run 2 said so.")
    assert "measuring again cannot help" in msg and NOTE in msg


def test_the_try_number_reaches_the_measurement():
    seen, waits = [], []

    def measure(attempt):  # the store's doubled wait on each later try
        seen.append(attempt)
        waits.append(3 * 2 ** (attempt - 1))
        return attempt

    done = retry(
        measure,
        lambda n: ("pass" if n == 3 else "miss", f"try {n}"),
        what="x",
        hint="y",
        numbered=True,
        say=lambda line: None,
    )
    assert seen == [1, 2, 3] and waits == [3, 6, 12] and done.result == 3
    _, calls, _ = _run(["miss", "pass"])
    assert calls == [(), ()]  # not numbered: called with no argument


def test_a_dict_verdict_keeps_its_numbers_and_true_false_mean_pass_miss():
    verdicts = iter([{"status": "miss", "text": "off", "table": 1}, (True, "ok")])
    done = retry(
        lambda: 0, lambda r: next(verdicts), what="x", hint="y", say=lambda s: None
    )
    assert done.verdict == "pass" and done.judged == (True, "ok")
    done = retry(
        lambda: 0,
        lambda r: {"status": "pass", "text": "fine", "table": 7},
        what="x",
        hint="y",
    )
    assert done.judged["table"] == 7 and done.text == "fine"
    with pytest.raises(AssertionError, match="missed on all 2 tries"):
        retry(lambda: 0, lambda r: (False, "no"), what="x", hint="y", tries=2)


@pytest.mark.parametrize("tries", [0, 11, 2.5, True, "3"])
def test_tries_outside_one_to_ten_are_refused(tries):
    with pytest.raises(ValueError, match=r"tries=.*\[1, 10\]"):
        retry(lambda: 0, lambda r: ("pass", ""), what="x", hint="y", tries=tries)


def test_bad_verdicts_and_arguments_name_themselves():
    with pytest.raises(ValueError, match="verdict='fail' is not allowed.*'busy'"):
        retry(lambda: 0, lambda r: ("fail", "no"), what="x", hint="y")
    with pytest.raises(ValueError, match="judge returned 'pass'"):
        retry(lambda: 0, lambda r: "pass", what="x", hint="y")
    with pytest.raises(ValueError, match="measure=3 must be a function"):
        retry(3, lambda r: ("pass", ""), what="x", hint="y")
    with pytest.raises(ValueError, match="judge=None must be a function"):
        retry(lambda: 0, None, what="x", hint="y")


def test_ratio_judge_passes_inside_its_bounds_only():
    judge = ratio_judge("measured", "ring model", (0.5, 2.5))
    r = {"measured_s": 2e-3, "predicted_s": 1e-3, "ratio": 2.0}
    assert judge(r) == (
        "pass",
        "measured 2.00 ms, ring model 1.00 ms, ratio 2.00 (allowed 0.5-2.5)",
    )
    assert judge(dict(r, ratio=3.0))[0] == "miss"
    assert judge(dict(r, ratio=0.4))[0] == "miss"


def test_the_load_note_says_cores_and_load_in_words(monkeypatch):
    # load_note as imported above is the real one; the fixture patched busy.load_note
    monkeypatch.setattr(busy.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(busy.os, "getloadavg", lambda: (5.0, 1.0, 1.0))
    assert load_note() == "load average 5.0 on 2 cores: busy"
    monkeypatch.setattr(busy.os, "getloadavg", lambda: (0.5, 1.0, 1.0))
    assert load_note() == "load average 0.5 on 2 cores: not saturated"

    def no_load():
        raise OSError("not reported")

    monkeypatch.setattr(busy.os, "getloadavg", no_load)
    assert load_note() == "2 cores, load unknown"
