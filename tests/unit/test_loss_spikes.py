"""A loss spike from one bad batch: found, skipped, and its triage judged."""

from __future__ import annotations

import pytest

from clusterlab.fault_tolerance import check, spikes


@pytest.fixture(scope="module")
def runs():
    seed = 3
    spiked = spikes.train(seed=seed)
    clean = spikes.train(seed=seed, corrupt=False)
    found = spikes.find_spikes(spiked["loss"])
    skipped = spikes.train(seed=seed, skip=found[:1])
    return spiked, clean, skipped, found, spikes.bad_step_of(seed, len(spiked))


def test_the_detector_finds_the_bad_batch_first_and_skipping_it_heals(runs):
    spiked, clean, skipped, found, bad = runs
    text = check.spike_triage(spiked, clean, skipped, found, bad)
    assert f"step {bad}" in text


def test_a_fixed_threshold_flags_the_early_steps_and_fails(runs):
    spiked, clean, skipped, _, bad = runs
    fixed = [i for i, loss in enumerate(spiked["loss"]) if loss > 0.2]
    with pytest.raises(AssertionError, match="recent past"):
        check.spike_triage(spiked, clean, skipped, fixed, bad)


def test_a_run_without_the_bad_batch_shows_no_damage_and_fails(runs):
    _, clean, skipped, found, bad = runs
    with pytest.raises(AssertionError, match="was the bad batch in"):
        check.spike_triage(clean, clean, skipped, found, bad)


def test_skipping_the_wrong_step_does_not_heal(runs):
    spiked, clean, _, found, bad = runs
    wrong = spikes.train(seed=3, skip=[bad - 5])
    with pytest.raises(AssertionError, match="skipping the batch"):
        check.spike_triage(spiked, clean, wrong, found, bad)


def test_bad_detector_arguments_are_named():
    with pytest.raises(ValueError, match="ratio"):
        spikes.find_spikes([1.0] * 30, ratio=1.0)
    with pytest.raises(ValueError, match="steps"):
        spikes.train(steps=10)
