"""Closed forms for failures, under the name the book's design fixes.

The checkpointing formulas (job MTBF, the Young/Daly interval, goodput) live in
``cl.models.checkpointing`` and the heartbeat detector's in
``cl.models.failures``, each named after its topic like its simulation, chart,
widget and check. This module keeps ``cl.models.reliability.young_daly_interval``,
``goodput`` and the rest importable for code written against that name.
"""

from .checkpointing import (  # noqa: F401 - re-exported
    checkpoint_cost_for_goodput,
    daly_interval,
    expected_wall_time,
    goodput,
    goodput_first_order,
    job_mtbf,
    mtbf_from_count,
    optimal_interval,
    part_mtbf,
    young_daly_interval,
)
from .failures import (  # noqa: F401 - re-exported
    heartbeat_detection_time,
    heartbeat_false_alarm_rate,
)

# Nothing is exported by name: ``cl.models.goodput`` would otherwise be
# ambiguous between this module and the topic module that defines it.
__all__: list[str] = []
