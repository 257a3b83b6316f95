"""The decision framework as a picture: a workload's traits lead to a verdict."""

import pandas as pd

from clusterlab.core.diagram import box_diagram, frame


def decision_spec() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The framework's questions and answers (rules D1-D4) as boxes and links."""
    q = "question"
    nodes = [
        dict(
            id="work",
            x=30,
            y=0,
            w=40,
            h=7,
            kind=q,
            label="What does the work spend its time on?",
        ),
        dict(
            id="dense",
            x=0,
            y=16,
            w=30,
            h=9,
            kind=q,
            label="dense matrix arithmetic,\nhigh FLOP per byte",
        ),
        dict(
            id="branchy",
            x=35,
            y=16,
            w=30,
            h=9,
            kind=q,
            label="branching logic, small\nrequests, consistency",
        ),
        dict(
            id="io",
            x=70,
            y=16,
            w=30,
            h=9,
            kind=q,
            label="waiting on I/O\nor the network",
        ),
        dict(
            id="fits",
            x=0,
            y=34,
            w=30,
            h=9,
            kind=q,
            label="fits in GPU memory,\nor can be sharded?",
        ),
        dict(
            id="gpu", x=0, y=52, w=30, h=7, kind="GPU cluster", label="D1: GPU cluster"
        ),
        dict(
            id="cpu", x=35, y=52, w=30, h=7, kind="CPUs", label="D2: distributed CPUs"
        ),
        dict(
            id="both",
            x=70,
            y=52,
            w=30,
            h=7,
            kind="both",
            label="D3: both (training with\ndata pipelines)",
        ),
        dict(
            id="hybrid",
            x=20,
            y=66,
            w=60,
            h=7,
            kind="label",
            label="D4: production systems are hybrids",
        ),
    ]
    links = [
        dict(src="work", dst="dense", label=""),
        dict(src="work", dst="branchy", label=""),
        dict(src="work", dst="io", label=""),
        dict(src="dense", dst="fits", label=""),
        dict(src="fits", dst="gpu", label="yes"),
        dict(src="fits", dst="cpu", label="no", straight=True),
        dict(src="branchy", dst="cpu", label=""),
        dict(src="io", dst="cpu", label="", straight=True),
        dict(src="io", dst="both", label="large training"),
        dict(src="gpu", dst="hybrid", label="", straight=True),
        dict(src="cpu", dst="hybrid", label=""),
        dict(src="both", dst="hybrid", label="", straight=True),
    ]
    links = [dict(r, kind="decides") for r in links]
    return frame(nodes, ()), frame(links, ())


def decision_diagram():
    """The decision framework of :func:`decision_spec`."""
    nodes, links = decision_spec()
    return box_diagram(
        nodes,
        links,
        title="Choosing GPUs, CPUs or both",
        subtitle="each question is a number an earlier chapter computes",
        size=(600, 300),
    )


__all__ = ["decision_diagram", "decision_spec"]
