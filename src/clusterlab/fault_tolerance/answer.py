"""Reference solution: the samples a group reads in a fault-tolerant step."""

from __future__ import annotations


def samples_for(step, quorum_rank, quorum_size, batches_committed, batch):
    """Sample ids of the group of rank ``quorum_rank`` in the quorum.

    The data position is the number of batches committed so far, over every step
    and group; it does not move on a step that fails, and it is sent to a healing
    group with the model. ``step`` and ``quorum_size`` are not needed. (The
    trainer adds a queue for the batches of groups that were healing:
    ``cl.fault_tolerance.train.advance``.)
    """
    first = (batches_committed + quorum_rank) * batch
    return list(range(first, first + batch))


__all__ = ["samples_for"]
