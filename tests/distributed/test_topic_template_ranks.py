"""The topic template's ranks run on a real process group."""


def test_the_template_measures_on_real_ranks():
    from clusterlab._topic_template.measure import measure_total

    df = measure_total(2, value=1.0)
    assert df["total"].tolist() == [3.0, 3.0]
