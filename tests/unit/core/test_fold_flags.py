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


def test_a_dotted_key_sets_a_nested_section_without_changing_it() -> None:
    section = {"policy": {"mode": "rack", "replicas": 3}, "keep": 1}
    args = argparse.Namespace(mode="per_idc", interval=30.0)
    out = BaseSource.flags_onto(section, args, {"mode": "policy.mode", "interval": "dci.seconds"})
    assert out == {
        "policy": {"mode": "per_idc", "replicas": 3},
        "dci": {"seconds": 30.0},
        "keep": 1,
    }
    assert section["policy"] == {"mode": "rack", "replicas": 3}


def test_config_flags_take_type_choices_and_help_from_the_config_model() -> None:
    from exporters.hdfs.source import HdfsSource

    p = argparse.ArgumentParser()
    HdfsSource.add_arguments(p)
    by_flag = {a.option_strings[0]: a for a in p._actions if a.option_strings}
    assert by_flag["--policy"].choices == ["per_idc", "rack"]
    assert by_flag["--replicas"].type is int
    assert by_flag["--namenode"].help == (
        "NameNode HTTP base URLs (http://nn:9870) (namenodes, repeatable)"
    )
    assert by_flag["--dci-interval"].help == "Budget interval (dci.interval_seconds, default 60.0)"
    argv = "--namenode http://a --namenode http://b --policy rack --per-idc 1 --dci-interval 30"
    args = p.parse_args([*argv.split(), "--dci-capacity", "a-b=1Gbit", "--datanode", ""])
    section = {"policy": {"replicas": 2}, "dci": {"capacity": {"a-c": "2Gbit"}}, "datanode": "d"}
    assert HdfsSource.fold_args(args, section) == {
        "namenodes": ["http://a", "http://b"],
        "policy": {"replicas": 2, "mode": "per_idc", "per_idc": 1},  # --per-idc implies its mode
        "dci": {"interval_seconds": 30.0, "capacity": {"a-c": "2Gbit", "a-b": "1Gbit"}},
        "datanode": "d",
    }
