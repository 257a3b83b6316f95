"""The control plane: Raft, the rendezvous store, etcd, schedulers.

Its code is reached as ``cl.control_plane.<file>.<name>``; each file holds one role
(``docs/architecture.md``), and loads on first use.

- ``answer``: Reference solution: the index a Raft leader may commit up to.
- ``chart``: Charts of the control plane: schedules as Gantt bars, elections, write
  latency.
- ``check``: Checks of the control plane: Raft's guarantees, the store, the schedulers.
- ``etcd`` (measure): An etcd server on loopback, for torchrun's etcd rendezvous,
  started and stopped.
- ``etcd_cluster`` (measure): A three-member etcd cluster on loopback, and a rendezvous
  that loses its leader.
- ``linearizable`` (check): Is a history of a register linearizable? A small
  Wing-Gong-Lowe search.
- ``raft`` (measure): A Raft cluster of real replicas on loopback: elect, write, kill,
  partition.
- ``raft_experiments`` (measure): Three experiments on a real Raft cluster: leader
  kills, a cut, write latency.
- ``raft_replica`` (ranks): One Raft replica (``pysyncobj``) driven by JSON lines on
  stdin and stdout.
- ``register`` (measure): A register on etcd under a fault: the history its clients
  saw, to be checked.
- ``register_client`` (ranks): A register client for etcd: writes and reads one key,
  and logs what it saw.
- ``ranks``: The worker of the store-host demonstration: a few all-reduces, a JSON line
  each.
- ``sim``: Cluster scheduling: gang against greedy allocation, backfill, topology.
- ``store`` (measure): The rendezvous store is a single point of failure: kill its host,
  mid-job.
- ``widget``: Widget for scheduling: cluster size, workload and policy -> a Gantt chart.
"""

from clusterlab.core.lazy import submodules

# The role of each file not named by its role (docs/architecture.md).
ROLES = {
    "etcd": "measure",
    "etcd_cluster": "measure",
    "raft": "measure",
    "raft_experiments": "measure",
    "linearizable": "check",
    "raft_replica": "ranks",
    "register": "measure",
    "register_client": "ranks",
    "store": "measure",
}

__getattr__, __dir__ = submodules(__name__, __path__)
