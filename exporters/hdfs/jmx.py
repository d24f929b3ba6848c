"""Hadoop `/jmx` JSON -> NameNode / DataNode sample rows, the NameNode's LiveNodes (DataNode
discovery), and an aiohttp scraper that fetches many endpoints concurrently with per-endpoint
timeouts. Which bean attribute feeds which field is data: jmx_metrics.yaml.

Read-only HTTP GETs. A failing endpoint (timeout, refused, truncated JSON, HTTP error) becomes a
row with up=0 and the reason; it never stops the scrape of the others, and never yields numbers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from telemetry.errors import UserError

log = logging.getLogger(__name__)

METRICS_FILE = Path(__file__).with_name("jmx_metrics.yaml")


@cache
def metric_map() -> dict[str, list[tuple[str, str, str, float]]]:
    """role -> [(bean name pattern, attribute, field, scale)] from jmx_metrics.yaml."""
    raw = yaml.safe_load(METRICS_FILE.read_text())
    out: dict[str, list[tuple[str, str, str, float]]] = {}
    for role, beans in raw.items():
        for bean, attrs in beans.items():
            for attr, spec in attrs.items():
                fld, _, scale = str(spec).partition("*")
                out.setdefault(role, []).append(
                    (bean, attr, fld.strip(), float(scale) if scale else 1.0)
                )
    return out


def _bean_matches(pattern: str, name: str) -> bool:
    # "DataNodeActivity-*" matches "Hadoop:service=DataNode,name=DataNodeActivity-dn0-50010"
    bean = name.partition(",name=")[2]
    return bean.startswith(pattern[:-1]) if pattern.endswith("*") else bean == pattern


def role_of(doc: Any) -> str:
    """'namenode' | 'datanode' | '' for a parsed /jmx document."""
    if not isinstance(doc, dict) or not isinstance(doc.get("beans"), list):
        return ""
    for b in doc["beans"]:
        name = str(b.get("name", "")) if isinstance(b, dict) else ""
        if name.startswith("Hadoop:service=NameNode,"):
            return "namenode"
        if name.startswith("Hadoop:service=DataNode,"):
            return "datanode"
    return ""


def sample(doc: dict[str, Any], role: str) -> dict[str, Any]:
    """Field values of one scrape. Values that are absent or not numbers stay absent (null)."""
    row: dict[str, Any] = {}
    beans = [b for b in doc["beans"] if isinstance(b, dict)]
    for pattern, attr, fld, scale in metric_map()[role]:
        if fld in row:
            continue  # first listed bean wins
        for b in beans:
            if _bean_matches(pattern, str(b.get("name", ""))):
                v = b.get(attr)
                if isinstance(v, bool) or not isinstance(v, int | float):
                    continue
                row[fld] = v * scale if scale != 1.0 else v
                break
    if role == "namenode":
        for b in beans:
            if str(b.get("name", "")).endswith("name=FSNamesystem") and isinstance(
                b.get("tag.HAState"), str
            ):
                row["ha_state"] = b["tag.HAState"]
            if str(b.get("name", "")).endswith("name=NameNodeStatus") and isinstance(
                b.get("State"), str
            ):
                row.setdefault("ha_state", b["State"])
            if str(b.get("name", "")).endswith("name=NameNodeInfo"):
                for attr, fld in (("LiveNodes", "live_datanodes"), ("DeadNodes", "dead_datanodes")):
                    if fld in row:  # FSNamesystemState's count wins: no node list parsed
                        continue
                    n = _count_nodes(b.get(attr))
                    if n is not None:
                        row[fld] = n
    return row


def _count_nodes(value: Any) -> int | None:
    """How many DataNodes a NameNodeInfo node list (a JSON object inside a string) names; None
    when it is absent or not such a list (live_nodes says why, for discovery)."""
    if not isinstance(value, str):
        return None
    try:
        nodes = json.loads(value)
    except ValueError:
        return None
    return len(nodes) if isinstance(nodes, dict) else None


@dataclass(frozen=True)
class LiveNode:
    name: str  # the NameNode's key: hostname:port of the transfer address (2.7+) or hostname
    info_addr: str  # host:port of the DataNode HTTP server (its /jmx)
    info_secure_addr: str
    xfer_addr: str


def live_nodes(
    doc: dict[str, Any], on_error: Callable[[str, str], None] | None = None
) -> list[LiveNode]:
    """DataNodes from NameNodeInfo.LiveNodes (a JSON string inside the JSON). A malformed entry
    is one DataNode's error (`on_error(name, why)`), skipped; the others are still returned."""
    for b in doc.get("beans", []):
        if isinstance(b, dict) and str(b.get("name", "")).endswith("name=NameNodeInfo"):
            raw = b.get("LiveNodes")
            try:
                nodes = json.loads(raw) if isinstance(raw, str) else (raw or {})
            except json.JSONDecodeError as e:
                raise UserError(f"NameNodeInfo.LiveNodes is not valid JSON: {e}") from None
            if not isinstance(nodes, dict):
                raise UserError(
                    f"NameNodeInfo.LiveNodes is a {type(nodes).__name__}, not an object"
                )
            out = []
            for name, n in sorted(nodes.items(), key=lambda kv: str(kv[0])):
                if not isinstance(n, dict) or not isinstance(n.get("infoAddr", ""), str):
                    if on_error is not None:
                        on_error(str(name), f"LiveNodes entry is not an object: {str(n)[:80]!r}")
                    continue
                info = str(n.get("infoAddr", ""))
                # Some versions report the wildcard bind address: use the node's own name instead.
                if info.startswith("0.0.0.0:"):
                    info = f"{name.partition(':')[0]}:{info.partition(':')[2]}"
                out.append(
                    LiveNode(
                        name, info, str(n.get("infoSecureAddr", "")), str(n.get("xferaddr", ""))
                    )
                )
            return out
    return []


# --- scraping -----------------------------------------------------------------------------------
# A NameNode's /jmx with LiveNodes of a few thousand DataNodes is a few MiB: 64 MiB is generous,
# and a misbehaving or hostile endpoint cannot make the exporter buffer more than that.
MAX_BODY_BYTES = 64 << 20


@dataclass
class ScrapeResult:
    endpoint: str  # base URL
    doc: dict[str, Any] | None
    error: str  # '' when it worked
    seconds: float


AuthHeader = Callable[[str], Awaitable[dict[str, str]]]


def ssl_context(
    ca_file: str | None, cert_file: str | None, key_file: str | None, verify: bool
) -> ssl.SSLContext:
    try:
        ctx = ssl.create_default_context(cafile=ca_file)
        if cert_file:
            ctx.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as e:
        raise UserError(f"sources.hdfs.tls: {e}") from None
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def spnego_auth(principal: str | None) -> AuthHeader:
    """SPNEGO (Kerberos) Authorization header per host, from the process's ticket cache / keytab
    (KRB5_CLIENT_KTNAME). Needs the optional `gssapi` package."""
    try:
        import gssapi  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise UserError(
            "sources.hdfs.kerberos.enabled needs the 'gssapi' Python package (pip install gssapi) and a Kerberos ticket"
        ) from None
    import base64
    from urllib.parse import urlsplit

    async def header(url: str) -> dict[str, str]:
        host = urlsplit(url).hostname or ""
        name = gssapi.Name(f"HTTP@{host}", gssapi.NameType.hostbased_service)
        creds = None
        if principal:
            creds = gssapi.Credentials(
                name=gssapi.Name(principal, gssapi.NameType.kerberos_principal), usage="initiate"
            )
        ctx = gssapi.SecurityContext(name=name, creds=creds, usage="initiate")
        token = ctx.step()
        return {"Authorization": "Negotiate " + base64.b64encode(token).decode()}

    return header


async def scrape(
    endpoints: Sequence[str],
    *,
    timeout: float,
    concurrency: int = 32,
    ssl_ctx: ssl.SSLContext | None = None,
    auth: AuthHeader | None = None,
    query: str = "",
    max_body_bytes: int = MAX_BODY_BYTES,
) -> list[ScrapeResult]:
    """GET BASE/jmx for every endpoint at once (at most `concurrency` in flight), each bounded by
    `timeout` seconds and `max_body_bytes`. Results come back in the order of `endpoints`."""
    import aiohttp

    sem = asyncio.Semaphore(concurrency)

    async def one(session: aiohttp.ClientSession, base: str) -> ScrapeResult:
        url = base.rstrip("/") + "/jmx" + (f"?{query}" if query else "")
        t = time.perf_counter()
        async with sem:
            try:
                headers = await auth(url) if auth else {}
                async with asyncio.timeout(timeout):
                    async with session.get(
                        url, headers=headers, ssl=ssl_ctx if ssl_ctx is not None else True
                    ) as r:
                        if r.status != 200:
                            return ScrapeResult(
                                base, None, f"HTTP {r.status}", time.perf_counter() - t
                            )
                        # never more than the cap in memory, whatever the server sends
                        body = await r.content.read(max_body_bytes + 1)
                        if len(body) > max_body_bytes:
                            return ScrapeResult(
                                base,
                                None,
                                f"HTTP body over {max_body_bytes} bytes",
                                time.perf_counter() - t,
                            )
                doc = json.loads(body)
                if not isinstance(doc, dict) or not isinstance(doc.get("beans"), list):
                    return ScrapeResult(
                        base, None, "not a /jmx document (no beans list)", time.perf_counter() - t
                    )
                return ScrapeResult(base, doc, "", time.perf_counter() - t)
            except TimeoutError:
                return ScrapeResult(
                    base, None, f"timeout after {timeout:g}s", time.perf_counter() - t
                )
            except json.JSONDecodeError as e:
                return ScrapeResult(
                    base, None, f"invalid JSON ({e.msg} at byte {e.pos})", time.perf_counter() - t
                )
            except (aiohttp.ClientError, OSError, ssl.SSLError) as e:
                return ScrapeResult(
                    base, None, f"{type(e).__name__}: {e}"[:200], time.perf_counter() - t
                )
            except UserError:
                raise
            except Exception as e:  # e.g. a Kerberos failure for one host; the others go on
                return ScrapeResult(
                    base, None, f"{type(e).__name__}: {e}"[:200], time.perf_counter() - t
                )

    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=conn) as session:
        return list(await asyncio.gather(*(one(session, e) for e in endpoints)))
