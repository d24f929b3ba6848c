"""BaseSource.flags_onto: command-line flags over a source's config section (fold_args)."""

from __future__ import annotations

import argparse

from telemetry.pipeline import BaseSource


def test_given_flags_override_the_section_and_unset_ones_do_not() -> None:
    section = {"topology_file": "/etc/topo", "datanode": "dn1:9866", "keep": 1}
    args = argparse.Namespace(topology="/tmp/t", datanode="", context=None, in_cluster=True)
    out = BaseSource.flags_onto(
        section, args, {"topology": "topology_file", "datanode": "datanode", "context": "context"}
    )
    # '' (an empty default) and None leave the section's value; a dest absent from args too
    assert out == {"topology_file": "/tmp/t", "datanode": "dn1:9866", "keep": 1}
    assert BaseSource.flags_onto({}, args, ("in_cluster", "missing")) == {"in_cluster": True}
    assert section["topology_file"] == "/etc/topo"  # the section itself is not changed
