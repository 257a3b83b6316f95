"""Record the book's runs across emulated nodes into data/cluster_runs.csv
(all-reduces), data/heartbeat_runs.csv (a detector across a lossy link) and
data/overlap_runs.csv (DDP's buckets across a slow link) and
data/torchft_cut_runs.csv (a torchft group's link cut and healed).

Run as root on a Linux machine with nftables and pyroute2::

    python scripts/record_cluster_runs.py [--heartbeats-only | --overlap-only |
                                           --cut-only]

The network labs show these rows where a reader's machine cannot emulate nodes
(Colab, macOS, no root). Each row carries its provenance: the machine, the
date and this command.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
from pathlib import Path

import pandas as pd

from clusterlab.cluster import experiments, recorded
from clusterlab.cluster.support import why_not
from clusterlab.data_parallel import overlap
from clusterlab.failures import lossy
from clusterlab.fault_tolerance import partition

#: cuts recorded for the fault-tolerance lab (each about 15 s)
CUTS = 3

DATA = Path(__file__).resolve().parents[1] / "data"
OUT = DATA / f"{recorded.TABLE}.csv"
COMMAND = " ".join(["python scripts/record_cluster_runs.py", *sys.argv[1:]])


def _write(table: pd.DataFrame, name: str, provenance: dict, source: str) -> None:
    """Write ``table`` to data/NAME.csv with its provenance and its source."""
    out = table.assign(**provenance)
    out["source"] = source
    path = DATA / f"{name}.csv"
    out.to_csv(path, index=False, float_format="%.6g")
    print(f"wrote {len(out)} rows to {path.name}")


def main() -> int:
    reason = why_not()
    if reason:
        print(reason, file=sys.stderr)
        return 2
    today = datetime.date.today().isoformat()
    machine = f"{platform.machine()} Linux {platform.release()}, {os.cpu_count()} cores"
    provenance = dict(
        machine=machine,
        date=today,
        command=COMMAND,
        source="recorded run: emulated nodes (network namespaces, tbf-shaped veth)",
        source_key="recorded",
        source_date=today[:7],
    )
    if "--overlap-only" in sys.argv:
        sweep = overlap.bucket_sweep_across_nodes(**overlap.EXPERIMENT)
        source = ("recorded run: emulated nodes (network namespaces, tbf-shaped "
                  "veth), DistributedDataParallel on gloo")  # fmt: skip
        _write(sweep, overlap.TABLE, provenance, source)
        return 0
    if "--cut-only" in sys.argv:
        rows = []
        for i in range(CUTS):
            run = partition.cut_and_heal(**partition.EXPERIMENT)
            rows.append(partition.cut_summary(run))
            print(f"cut {i + 1} of {CUTS}: stall {rows[-1]['stall_s']:.2f} s")
        source = ("recorded run: torchft 0.2.0, a lighthouse and three replica "
                  "groups on three emulated nodes, node 2 cut off both ways by "
                  "nftables")  # fmt: skip
        _write(pd.DataFrame(rows)[partition.COLUMNS], partition.TABLE, provenance,
               source)  # fmt: skip
        return 0
    if "--heartbeats-only" not in sys.argv:
        tables = []
        for name, kwargs in experiments.RECORDED.items():
            df = recorded.measure(name, **kwargs)
            tables.append(df)
        out = pd.concat(tables, ignore_index=True).assign(**provenance)
        out.to_csv(OUT, index=False, float_format="%.6g")
        print(f"wrote {len(out)} rows to {OUT.name}")
    run = lossy.heartbeats_over_loss(**lossy.EXPERIMENT)
    beats = lossy.false_alarms(run, lossy.TIMEOUTS_MS)
    source = "recorded run: emulated nodes (network namespaces, nftables random loss)"
    _write(beats, lossy.TABLE, provenance, source)
    return 0


if __name__ == "__main__":
    sys.exit(main())
