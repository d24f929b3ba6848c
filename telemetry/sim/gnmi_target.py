"""A gNMI target: grpcio with pygnmi's gNMIServicer (the published gnmi.proto) serving SONiC
telemetry paths (COUNTERS_DB/APPL_DB virtual paths) from COUNTERS_DB/APPL_DB hashes and
OpenConfig paths from OpenConfig JSON. The simulator serves its switches through it
(through_parsers.py, `switch_transport="gnmi"`); the switch tests and bench/switch.py serve the
SONiC dump and synthetic switches.

The state can be replaced while it serves (`set_state`): the next SAMPLE carries it, ON_CHANGE
subscribers get the APPL_DB tables again, and notifications carry the given switch time.
Behaviours a test can ask for: `users` (username/password metadata checked), `behaviour`
"ok" | "hang" (takes the call, never answers) | "garbage" (counters that are not JSON / not
numbers) | "no_stream" (STREAM refused: UNIMPLEMENTED) | "no_subscribe" (Subscribe refused) |
"no_fields" (`COUNTERS/Ethernet*/<counter>` refused: NOT_FOUND, as a telemetry service without
that virtual path would) | "no_config" (a Get of CONFIG_DB refused: NOT_FOUND),
`stop_after` (samples sent in all before the target goes silent), `serve_paths` (the paths it
serves, as "TARGET" or "TARGET:path/prefix", e.g. "COUNTERS_DB" or "APPL_DB:PORT_TABLE"; a Get or
Subscribe naming any other is refused NOT_FOUND as a whole, as sonic-gnmi refuses a path it does
not have; default: every path), and TLS credentials;
`rendered` renders each answer once per state and `phase_s` delays a STREAM's SAMPLEs after the
first (bench/switch.py's targets).
Without `set_state` times, every notification carries `base_ns` + 1 s per sample sent.

As SONiC's telemetry service (sonic-gnmi): CONFIG_DB tables are answered `{key: hash}` (`config`,
CONFIG_DB hashes such as `PORT|Ethernet0`, default none); the COUNTERS answers are keyed by each
port's vendor alias (CONFIG_DB `PORT|<name>` `alias`) where it has one, a queue as
`<alias>:<index>` (virtual_db.go v2rEthPortStats, v2rEthPortQueStats); `COUNTERS/Ethernet*/<counter>` is one counter of every
port, `{port: {counter: "n"}}` with the ports that lack it left out (virtual_db.go
v2rEthPortFieldStats, db_client.go dbFieldMultiSubscribe), and a STREAM sends each SAMPLE path
in a notification of its own (a goroutine per subscribed path there).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
from pygnmi.spec.v080 import gnmi_pb2 as pb
from pygnmi.spec.v080 import gnmi_pb2_grpc


def _elems(path: Any) -> list[tuple[str, dict[str, str]]]:
    return [(e.name, dict(e.key)) for e in path.elem]


def _path(elems: list[tuple[str, dict[str, str]]]) -> Any:
    return pb.Path(elem=[pb.PathElem(name=n, key=k) for n, k in elems])


def _json(v: Any) -> Any:
    return pb.TypedValue(json_ietf_val=json.dumps(v).encode())


class Target(gnmi_pb2_grpc.gNMIServicer):
    def __init__(
        self,
        counters: dict[str, Any],
        appl: dict[str, Any],
        oc: dict[str, Any],
        *,
        config: dict[str, Any] | None = None,
        users: dict[str, str] | None = None,
        behaviour: str = "ok",
        stop_after: int | None = None,
        base_ns: int | None = None,
        rendered: bool = False,
        phase_s: float = 0.0,
        leaf_offset_ns: Callable[[str], int] | None = None,
        serve_paths: list[str] | None = None,
    ) -> None:
        self.counters, self.appl, self.oc = counters, appl, oc
        self.serve_paths = serve_paths
        self.config = config or {}
        # SONiC port name -> vendor alias: the keys of the COUNTERS answers
        self.alias = {
            k[len("PORT|") :]: h["alias"]
            for k, h in self.config.items()
            if k.startswith("PORT|") and h.get("alias")
        }
        # rendered: the state changes only through set_state, so each answer is rendered once
        # per state (a benchmark's targets keep up with many switches); without it, every
        # sample is rendered from the state as it is (a test may edit it in place)
        self.rendered = rendered
        # a STREAM's second SAMPLE comes this much later than one interval after the first (a
        # benchmark spreads its switches' samples over the interval, as switches whose timers
        # started at different times send them)
        self.phase_s = phase_s
        # each port's counters in a notification of their own, stamped with the sample's time
        # plus leaf_offset_ns(port): a switch that times every leaf on its own (gNMI's per-leaf
        # timestamps; what collection sees of it: telemetry/sim/timing.py)
        self.leaf_offset_ns = leaf_offset_ns
        self._renders: dict[Any, list[Any]] = {}
        self.users = users
        self.behaviour = behaviour
        self.stop_after = stop_after
        # an hour behind the collector by default: a test can tell the switch's time from ours
        self.base_ns = base_ns if base_ns is not None else time.time_ns() - 3600 * 10**9
        self.samples = 0
        self.requests: list[str] = []  # "Get", "STREAM", "POLL", "poll" as they arrive
        self.paths: list[str] = []  # the paths of each Subscribe, "COUNTERS/Ethernet*" ...
        self.lock = threading.RLock()  # _notification inside a held lock: one state for a sample
        # waits for the next state or the call's end (no polling: a benchmark's 256 targets
        # share the machine with the collector they feed)
        self._cond = threading.Condition(self.lock)
        self.now_ns: int | None = None  # the switch's time, where set_state gave one
        self.version = 0  # set_state calls so far

    # -- what the switch holds -----------------------------------------------------------
    def set_state(self, counters: dict[str, Any], appl: dict[str, Any], now_ns: int) -> None:
        """Replace what the switch holds (COUNTERS_DB and APPL_DB hashes) and its clock: the
        next SAMPLE and an ON_CHANGE update of APPL_DB carry them, stamped `now_ns`."""
        with self._cond:
            self.counters, self.appl, self.now_ns = counters, appl, now_ns
            self.version += 1
            self._cond.notify_all()

    def _ts(self) -> int:
        if self.now_ns is not None:
            return self.now_ns
        return self.base_ns + self.samples * 1_000_000_000

    def _watch(self, context: Any) -> None:
        """Wake this target's waits when the call ends (the client cancelled or went away)."""

        def ended() -> None:
            with self._cond:
                self._cond.notify_all()

        context.add_callback(ended)

    def _changed(self, seen: int, within: float, context: Any) -> bool:
        """Wait up to `within` seconds for a set_state after version `seen` (or the call's
        end, which `_watch` signals)."""
        end = time.monotonic() + within
        with self._cond:
            while self.version == seen and context.is_active():
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return self.version != seen

    def answer(self, target: str, path: Any, counters: Any = None, appl: Any = None) -> list[Any]:
        """Updates for one requested path (wildcards expanded as the switch would), from the
        given state (default: the current one)."""
        counters = self.counters if counters is None else counters
        appl = self.appl if appl is None else appl
        e = _elems(path)
        names = [n for n, _ in e]
        a = self.alias

        def qkey(q: str) -> str:
            port, _, idx = q.rpartition(":")
            return f"{a.get(port, port)}:{idx}"

        if target == "CONFIG_DB":
            if len(names) == 1:
                pre = names[0] + "|"
                rows = {k[len(pre) :]: h for k, h in self.config.items() if k.startswith(pre)}
                return [pb.Update(path=path, val=_json(rows))]
            return []
        if target == "COUNTERS_DB":
            if names == ["COUNTERS", "Ethernet*"]:
                v: Any = {
                    a.get(p, p): counters[f"COUNTERS:{oid}"]
                    for p, oid in counters["COUNTERS_PORT_NAME_MAP"].items()
                }
                if self.behaviour == "garbage":
                    return [pb.Update(path=path, val=pb.TypedValue(json_ietf_val=b"{Ethernet0: "))]
                return [pb.Update(path=path, val=_json(v))]
            if len(names) == 3 and names[:2] == ["COUNTERS", "Ethernet*"] and names[2] != "Queues":
                f = names[2]  # one counter of every port that has it
                v = {}
                for p, oid in counters["COUNTERS_PORT_NAME_MAP"].items():
                    h = counters.get(f"COUNTERS:{oid}", {})
                    if f in h:
                        v[a.get(p, p)] = {f: h[f]}
                if self.behaviour == "garbage":
                    return [pb.Update(path=path, val=pb.TypedValue(json_ietf_val=b"{Ethernet0: "))]
                return [pb.Update(path=path, val=_json(v))]
            if names == ["COUNTERS", "Ethernet*", "Queues"]:
                v = {
                    qkey(q): counters[f"COUNTERS:{oid}"]
                    for q, oid in counters["COUNTERS_QUEUE_NAME_MAP"].items()
                    if f"COUNTERS:{oid}" in counters
                }
                if self.behaviour == "garbage":  # numbers that are not numbers
                    v = {q: {k: "lots" for k in h} for q, h in v.items()}
                return [pb.Update(path=path, val=_json(v))]
            if len(names) == 1 and names[0] in counters:
                return [pb.Update(path=path, val=_json(counters[names[0]]))]
            return []
        if target == "APPL_DB":
            if len(names) == 1:
                pre = names[0] + ":"
                v = {k[len(pre) :]: h for k, h in appl.items() if k.startswith(pre)}
                return [pb.Update(path=path, val=_json(v))]
            return []
        return self._oc(e)

    def _oc(self, e: list[tuple[str, dict[str, str]]]) -> list[Any]:
        names = [n for n, _ in e]
        out = []
        ifs = self.oc["openconfig-interfaces:interfaces"]["interface"]
        if names[:2] == ["interfaces", "interface"]:
            for i in ifs:
                here = [("interfaces", {}), ("interface", {"name": i["name"]})]
                tail = names[2:]
                if tail == ["state", "counters"]:
                    out.append(pb.Update(path=_path([*here, ("state", {}), ("counters", {})]),
                                         val=_json(i["state"]["counters"])))  # fmt: skip
                elif tail == ["state", "oper-status"]:
                    out.append(pb.Update(path=_path([*here, ("state", {}), ("oper-status", {})]),
                                         val=pb.TypedValue(string_val=i["state"]["oper-status"])))  # fmt: skip
                elif tail == ["ethernet", "state", "port-speed"]:
                    sp = i.get("openconfig-if-ethernet:ethernet", {}).get("state", {})
                    if "port-speed" in sp:
                        out.append(pb.Update(
                            path=_path([*here, ("ethernet", {}), ("state", {}), ("port-speed", {})]),
                            val=pb.TypedValue(string_val=sp["port-speed"])))  # fmt: skip
        elif names[:3] == ["qos", "interfaces", "interface"] and "pfc-priorities" in names:
            # openconfig-qos-ext (Enterprise SONiC): per-priority PFC statistics
            for i in self.oc["openconfig-qos:qos"]["interfaces"]["interface"]:
                for pr in (
                    i.get("openconfig-qos-ext:pfc", {})
                    .get("pfc-priorities", {})
                    .get("pfc-priority", [])
                ):
                    p = [("qos", {}), ("interfaces", {}), ("interface", {"interface-id": i["interface-id"]}),
                         ("pfc", {}), ("pfc-priorities", {}), ("pfc-priority", {"dot1p": str(pr["dot1p"])}),
                         ("state", {})]  # fmt: skip
                    out.append(pb.Update(path=_path(p), val=_json(pr["state"])))
        elif names[:3] == ["qos", "interfaces", "interface"]:
            for i in self.oc["openconfig-qos:qos"]["interfaces"]["interface"]:
                for q in i["output"]["queues"]["queue"]:
                    p = [("qos", {}), ("interfaces", {}), ("interface", {"interface-id": i["interface-id"]}),
                         ("output", {}), ("queues", {}), ("queue", {"name": q["name"]}), ("state", {})]  # fmt: skip
                    out.append(pb.Update(path=_path(p), val=_json(q["state"])))
        elif names[:3] == ["lldp", "interfaces", "interface"]:
            for i in self.oc["openconfig-lldp:lldp"]["interfaces"]["interface"]:
                for n in i["neighbors"]["neighbor"]:
                    p = [("lldp", {}), ("interfaces", {}), ("interface", {"name": i["name"]}),
                         ("neighbors", {}), ("neighbor", {"id": n["id"]}), ("state", {})]  # fmt: skip
                    out.append(pb.Update(path=_path(p), val=_json(n["state"])))
        return out

    def _refuses(self, target: str, paths: list[Any]) -> str | None:
        """What a "no_fields" target says to a request naming a per-counter path, a "no_config"
        one to any CONFIG_DB request, and one with `serve_paths` to a path it does not serve."""
        if self.serve_paths is not None:
            for p in paths:
                key = f"{target}:{'/'.join(n for n, _ in _elems(p))}"
                if not any(
                    key == e or key.startswith(e + "/") or key.startswith(e + ":")
                    for e in self.serve_paths
                ):
                    return f"path not found: {key}"
        if self.behaviour == "no_config" and target == "CONFIG_DB":
            return "target CONFIG_DB is not allowed for this user"
        if self.behaviour != "no_fields" or target != "COUNTERS_DB":
            return None
        for p in paths:
            names = [n for n, _ in _elems(p)]
            if len(names) == 3 and names[:2] == ["COUNTERS", "Ethernet*"] and names[2] != "Queues":
                return f"Invalid subscription path: {names} not found in virtual path tree"
        return None

    def _notification(self, target: str, paths: list[Any]) -> Any:
        with self.lock:  # one state per notification, however set_state interleaves
            counters, appl, ts, version = self.counters, self.appl, self._ts(), self.version
        key = (version, target, tuple(p.SerializeToString() for p in paths))
        ups = self._renders.get(key) if self.rendered else None
        if ups is None:
            ups = [u for p in paths for u in self.answer(target, p, counters, appl)]
            if self.rendered:
                self._renders = {k: v for k, v in self._renders.items() if k[0] == version}
                self._renders[key] = ups
        return pb.Notification(timestamp=ts, prefix=pb.Path(target=target), update=ups)

    def _notifications(self, target: str, paths: list[Any]) -> list[Any]:
        """_notification, split per port where the switch stamps each leaf with its own time
        (`leaf_offset_ns`): `COUNTERS/Ethernet*` becomes one `COUNTERS/<port>` update per port,
        each in a notification of its own; the other updates keep the sample's time."""
        n = self._notification(target, paths)
        if self.leaf_offset_ns is None or target != "COUNTERS_DB":
            return [n]
        out, rest = [], []
        for u in n.update:
            if [e.name for e in u.path.elem] != ["COUNTERS", "Ethernet*"]:
                rest.append(u)
                continue
            for port, h in json.loads(u.val.json_ietf_val).items():
                path = pb.Path(elem=[pb.PathElem(name="COUNTERS"), pb.PathElem(name=port)])
                out.append(
                    pb.Notification(
                        timestamp=n.timestamp + self.leaf_offset_ns(port),
                        prefix=n.prefix,
                        update=[pb.Update(path=path, val=_json(h))],
                    )
                )
        if rest:
            out.insert(0, pb.Notification(timestamp=n.timestamp, prefix=n.prefix, update=rest))
        return out

    # -- gNMI ------------------------------------------------------------------------------
    def _auth(self, context: Any) -> None:
        if self.users is None:
            return
        md = dict(context.invocation_metadata())
        if self.users.get(md.get("username", "")) != md.get("password"):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "bad username or password")

    def _hang(self, context: Any) -> None:
        """Answer nothing until the call ends (its RPC registered `_watch`)."""
        with self._cond:
            while context.is_active():
                self._cond.wait(1.0)

    def Get(self, request: Any, context: Any) -> Any:
        self._auth(context)
        self._watch(context)
        self.requests.append("Get")
        if self.behaviour == "hang":
            self._hang(context)
            return pb.GetResponse()
        if (why := self._refuses(request.prefix.target, list(request.path))) is not None:
            context.abort(grpc.StatusCode.NOT_FOUND, why)
        return pb.GetResponse(
            notification=self._notifications(request.prefix.target, list(request.path))
        )

    def Capabilities(self, request: Any, context: Any) -> Any:
        self._auth(context)
        return pb.CapabilityResponse(
            supported_encodings=[pb.Encoding.JSON_IETF], gNMI_version="0.8.0"
        )

    def _silent(self) -> bool:
        with self.lock:
            if self.stop_after is not None and self.samples >= self.stop_after:
                return True
            self.samples += 1
            return False

    def Subscribe(self, request_iterator: Any, context: Any) -> Any:
        self._auth(context)
        self._watch(context)
        first = next(request_iterator)
        sl = first.subscribe
        mode = pb.SubscriptionList.Mode.Name(sl.mode)
        self.requests.append(mode)
        if self.behaviour == "hang":
            self._hang(context)
            return
        if self.behaviour == "no_subscribe" or (self.behaviour == "no_stream" and mode == "STREAM"):
            context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{mode} not supported")
        target = sl.prefix.target
        self.paths += ["/".join(n for n, _ in _elems(s.path)) for s in sl.subscription]
        if (why := self._refuses(target, [s.path for s in sl.subscription])) is not None:
            context.abort(grpc.StatusCode.NOT_FOUND, why)
        sample = [s.path for s in sl.subscription if s.mode != pb.SubscriptionMode.ON_CHANGE]
        change = [s.path for s in sl.subscription if s.mode == pb.SubscriptionMode.ON_CHANGE]
        if mode == "POLL":
            for n in self._notifications(target, [s.path for s in sl.subscription]):
                yield pb.SubscribeResponse(update=n)
            yield pb.SubscribeResponse(sync_response=True)
            for req in request_iterator:
                if req.WhichOneof("request") != "poll":
                    continue
                self.requests.append("poll")
                if self._silent():
                    self._hang(context)
                    return
                for n in self._notifications(target, [s.path for s in sl.subscription]):
                    yield pb.SubscribeResponse(update=n)
                yield pb.SubscribeResponse(sync_response=True)
            return
        seen = self.version
        if change:
            yield pb.SubscribeResponse(update=self._notification(target, change))
        if not sample:
            yield pb.SubscribeResponse(sync_response=True)
            while context.is_active():  # ON_CHANGE: the tables again after each set_state
                if self._changed(seen, 1.0, context):
                    seen = self.version
                    yield pb.SubscribeResponse(update=self._notification(target, change))
            return
        interval = min(s.sample_interval for s in sl.subscription if s.path in sample) / 1e9
        synced = False
        while context.is_active():
            if self._silent():
                self._hang(context)
                return
            seen = self.version
            # each SAMPLE path in its own notification, as SONiC's telemetry service sends them
            # (one state for all of them: a set_state in between waits for the next sample)
            with self.lock:
                ups = [n for p in sample for n in self._notifications(target, [p])]
            for n in ups:
                yield pb.SubscribeResponse(update=n)
            wait = interval or 1.0
            if not synced:
                yield pb.SubscribeResponse(sync_response=True)
                synced = True
                wait += self.phase_s  # from then on, every interval at this phase
            # the next sample after the interval, or at once when the state is replaced
            self._changed(seen, wait, context)


def serve(target: Target, creds: Any = None, workers: int = 16, port: int = 0) -> tuple[Any, int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
    gnmi_pb2_grpc.add_gNMIServicer_to_server(target, server)
    port = (
        server.add_secure_port(f"127.0.0.1:{port}", creds)
        if creds is not None
        else server.add_insecure_port(f"127.0.0.1:{port}")
    )
    server.start()
    return server, port
