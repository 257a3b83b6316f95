"""The serving exercise's check: right passes, a stub is not attempted, wrong fails."""

import pytest

from clusterlab.serving import answer, check


def test_the_reference_answer_matches_the_engine(capsys):
    assert check.blocks_held(answer.blocks_held)
    assert "engine states matched" in capsys.readouterr().out


def test_the_stub_is_not_attempted(capsys):
    def stub(prompt_len, steps, block_size):
        raise NotImplementedError

    check.blocks_held(stub)
    assert "not attempted" in capsys.readouterr().out


def test_counting_the_newest_token_fails_with_a_hint():
    def off_by_one(prompt_len, steps, block_size):
        return -(-(prompt_len + steps) // block_size)

    with pytest.raises(AssertionError, match="newest token is not cached"):
        check.blocks_held(off_by_one)
