"""Topology: the declared Volcano HyperNode tree (LCA for many node pairs) and the physical graph
from LLDP + GPU<->NIC affinity (scalable units, generated HyperNodes, drift). See docs/topology.md."""

from telemetry.topology.hypernodes import HyperNodeSpec, HyperNodeTree, Problem, load_manifests

__all__ = ["HyperNodeSpec", "HyperNodeTree", "Problem", "load_manifests"]
