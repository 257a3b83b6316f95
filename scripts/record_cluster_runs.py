"""Record the book's runs across emulated nodes into data/cluster_runs.csv.

Run as root on a Linux machine with nftables and pyroute2::

    python scripts/record_cluster_runs.py

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

OUT = Path(__file__).resolve().parents[1] / "data" / f"{recorded.TABLE}.csv"
COMMAND = "python scripts/record_cluster_runs.py"


def main() -> int:
    reason = why_not()
    if reason:
        print(reason, file=sys.stderr)
        return 2
    today = datetime.date.today().isoformat()
    machine = f"{platform.machine()} Linux {platform.release()}, {os.cpu_count()} cores"
    tables = []
    for name, kwargs in experiments.RECORDED.items():
        df = recorded.measure(name, **kwargs)
        tables.append(df)
    out = pd.concat(tables, ignore_index=True)
    out = out.assign(
        machine=machine,
        date=today,
        command=COMMAND,
        source="recorded run: emulated nodes (network namespaces, tbf-shaped veth)",
        source_key="recorded",
        source_date=today[:7],
    )
    out.to_csv(OUT, index=False, float_format="%.6g")
    print(f"wrote {len(out)} rows to {OUT.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
