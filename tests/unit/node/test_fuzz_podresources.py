"""Fuzzing the kubelet pod-resources replies with inputs seeded from the fixture node's capture:
the JSON replay form (`parse_json`: only PodResourcesError escapes, counted as
podresources:malformed_podresources) and the gRPC reply (protobuf bytes, mutated; what decodes
goes through `assignments_from_list`, which never raises). >= 100,000 inputs each; marked slow."""

from __future__ import annotations

import json
import random

import pytest
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from hypothesis import given

from exporters.node import podresources_v1_pb2 as pb
from exporters.node.podresources import (
    Matcher,
    PodResourcesError,
    assignments_from_list,
    parse_json,
)
from tests.fuzz import FUZZ, SEED, fragment, json_value, mutate
from tests.sysfs_fixture import node8

pytestmark = pytest.mark.slow
PER_EXAMPLE = 250
NEEDED = 100_000
MATCH = Matcher(["nvidia.com/gpu", "nvidia.com/mig-"], ["nvidia.com/rdma_vf", "rdma/"])
TEXT = (node8() / "podresources.json").read_text()
DOC = json.loads(TEXT)
WIRE = json_format.ParseDict(
    {k: v for k, v in DOC.items() if k != "allocatable"}, pb.ListPodResourcesResponse()
).SerializeToString()


def _json_input(rnd: random.Random) -> str:
    """The capture's text mutated, or its document with one value replaced by any JSON value."""
    r = rnd.random()
    if r < 0.5:
        return mutate(rnd, TEXT)
    if r < 0.9:
        doc = json.loads(TEXT)
        node: object = doc
        while isinstance(node, dict | list) and node and rnd.random() < 0.8:
            key = rnd.choice(list(node)) if isinstance(node, dict) else rnd.randrange(len(node))
            if rnd.random() < 0.3 or not isinstance(node[key], dict | list):  # type: ignore[index]
                node[key] = json_value(rnd)  # type: ignore[index]
                break
            node = node[key]  # type: ignore[index]
        return json.dumps(doc)
    return json.dumps(json_value(rnd)) if rnd.random() < 0.5 else fragment(rnd, 80)


def test_json_reply_lets_only_podresources_error_out() -> None:
    fed = [0]
    seen = {"ok": 0, "rejected": 0}

    @FUZZ
    @given(SEED)
    def run(seed: int) -> None:
        rnd = random.Random(seed)
        for _ in range(PER_EXAMPLE):
            text = _json_input(rnd)
            fed[0] += 1
            try:
                a = parse_json(text, MATCH)
            except PodResourcesError as e:
                assert e.reason == "malformed_podresources"
                seen["rejected"] += 1
                continue
            seen["ok"] += 1
            assert all(isinstance(k, str) for k in a.owners)
            assert all(n >= 0 for n in a.allocatable.values())

    run()
    assert fed[0] >= NEEDED
    assert seen["ok"] and seen["rejected"]  # both paths exercised


def _wire_input(rnd: random.Random) -> bytes:
    b = bytearray(WIRE)
    for _ in range(rnd.randint(1, 3)):
        i = rnd.randrange(len(b) + 1)
        op = rnd.random()
        if op < 0.5 and i < len(b):
            b[i] = rnd.randrange(256)
        elif op < 0.7:
            del b[i : i + rnd.randint(1, 16)]
        elif op < 0.9:
            b[i:i] = rnd.randbytes(rnd.randint(1, 8))
        else:
            del b[i:]
    return bytes(b)


def test_grpc_reply_that_decodes_never_breaks_attribution() -> None:
    fed = [0]
    decoded = [0]

    @FUZZ
    @given(SEED)
    def run(seed: int) -> None:
        rnd = random.Random(seed)
        for _ in range(PER_EXAMPLE):
            fed[0] += 1
            try:  # grpc's own decode: a reply that fails it is an RpcError, counted upstream
                resp = pb.ListPodResourcesResponse.FromString(_wire_input(rnd))
            except DecodeError:
                continue
            decoded[0] += 1
            a = assignments_from_list(resp, MATCH)
            assert all(MATCH.wanted(o.resource) for o in a.owners.values())

    run()
    assert fed[0] >= NEEDED and decoded[0] >= 2_000  # mutated replies that still decode
