"""The template topic's tests; move them to ``tests/unit/test_<topic>.py``."""

import pytest

from clusterlab._topic_template import answer, chart, check, diagram, sim


def test_the_simulation_is_seeded_and_validated():
    a, b = (sim.simulate(sim.SumParams(5), seed=1) for _ in range(2))
    assert a.equals(b) and len(a) == 5
    with pytest.raises(ValueError, match="n_workers"):
        sim.SumParams(0)


def test_the_chart_and_diagram_draw():
    assert chart.total_chart(sim.simulate(sim.SumParams())).to_dict()
    assert diagram.sum_diagram(3).to_dict()
    with pytest.raises(ValueError, match="lacks the column"):
        chart.total_chart(sim.simulate(sim.SumParams()).drop(columns="total"))


def test_the_check_passes_the_answer_and_fails_a_wrong_one():
    assert check.total_of(answer.total_of)

    def stub(values):
        raise NotImplementedError

    assert check.total_of(stub) is False
    with pytest.raises(AssertionError, match="add every value"):
        check.total_of(lambda values: 0.0)
