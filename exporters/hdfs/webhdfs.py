"""WebHDFS block-location JSON -> the same BlockInfo rows fsck gives: `op=GETFILEBLOCKLOCATIONS`
({"BlockLocations": {"BlockLocation": [...]}}, no block ids: identified by offset) and the older
`op=GET_BLOCK_LOCATIONS` ({"LocatedBlocks": {...}}, with block ids).

Pure parsing of an already fetched document; never contacts the NameNode itself.
"""

from __future__ import annotations

from typing import Any

from exporters.hdfs.fsck import BlockInfo, Replica
from telemetry.errors import UserError


def looks_like_webhdfs(doc: Any) -> bool:
    return isinstance(doc, dict) and ("BlockLocations" in doc or "LocatedBlocks" in doc)


def parse_block_locations(doc: Any, path: str, *, origin: str = "webhdfs") -> list[BlockInfo]:
    if not looks_like_webhdfs(doc):
        raise UserError(
            f"{origin}: not a WebHDFS block-location document (no BlockLocations/LocatedBlocks)"
        )
    try:
        if "BlockLocations" in doc:
            return [_from_location(b, path) for b in doc["BlockLocations"]["BlockLocation"]]
        return [_from_located(b, path) for b in doc["LocatedBlocks"]["locatedBlocks"]]
    except (KeyError, TypeError, ValueError, AttributeError) as e:  # any shape but the documented
        raise UserError(
            f"{origin}: malformed block-location document: {type(e).__name__}: {e}"
        ) from None


def _from_location(b: dict[str, Any], path: str) -> BlockInfo:
    names = list(b.get("names") or b["hosts"])
    topo = list(b.get("topologyPaths") or [])
    reps: list[Replica] = []
    for i, name in enumerate(names):
        rack = ""
        if i < len(topo) and topo[i].startswith("/"):
            rack = topo[i].rpartition("/")[0]  # "/idc/rack/host:port" -> "/idc/rack"
        reps.append((str(name), rack))
    return _block(path, f"offset={int(b['offset'])}", int(b["length"]), reps)


def _from_located(b: dict[str, Any], path: str) -> BlockInfo:
    blk = b["block"]
    reps: list[Replica] = []
    for loc in b.get("locations") or []:
        host = f"{loc.get('ipAddr') or loc['hostName']}:{int(loc['xferPort'])}"
        rack = str(loc.get("networkLocation") or "")
        reps.append((host, rack))
    block_id = f"{blk['blockPoolId']}:blk_{int(blk['blockId'])}_{int(blk['generationStamp'])}"
    return _block(path, block_id, int(blk["numBytes"]), reps)


def _block(path: str, block_id: str, length: int, reps: list[Replica]) -> BlockInfo:
    """WebHDFS lists live replicas only: no target replication, missing when none is listed."""
    return BlockInfo(
        path=path,
        block_id=block_id,
        length=length,
        live_replicas=len(reps),
        replication=None,
        replicas=tuple(reps),
        missing=not reps,
        source="webhdfs",
    )
