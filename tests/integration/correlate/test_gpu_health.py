"""GPU health on the real embedded store: Xid events judged by NVIDIA's Xid catalog (the action
on the finding, the incident and its remediation; IGNORE opens no incident unless repeated), and
the memory, NVLink and PCIe findings from NVML counters sampled off the 10 s grid."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

from exporters.logs import grammar
from telemetry.correlate import findings as fstore
from telemetry.correlate import incident_store
from telemetry.records import GPU_EVENT, GPU_SAMPLE, LOG_EVENT, NVLINK_SAMPLE, RecordKind
from telemetry.store import Store
from tests.integration.correlate.test_detectors import ms, run, t0

DRAIN = re.compile(r"\b(drain|cordon)", re.IGNORECASE)


def _xid(s: datetime, at_s: float, node: str, gpu: int, code: int, detail: str = "") -> dict:
    return {
        "ts": ms(s) + int(at_s * 1000),
        "cluster": "c",
        "node": node,
        "gpu": gpu,
        "uuid": f"GPU-{node}-{gpu}",
        "event": "xid",
        "xid": code,
        "detail": detail or f"NVRM: Xid (PCI:0000:1b:00): {code}, pid=1",
    }


def _by_subject(store: Store) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for f in fstore.read(store, kinds=["gpu_xid"]):
        out.setdefault(f["subject"], f)
    return out


def test_xid_actions_follow_nvidias_catalog_and_ignore_pages_no_one(store: Store) -> None:
    s = t0()
    rows = [
        _xid(s, 61.3, "n1", 0, 63),  # IGNORE, once: a quiet finding, no incident
        _xid(s, 62.7, "n1", 1, 94),  # RESTART_APP: the job restarts, the node stays
        _xid(s, 63.1, "n1", 2, 79),  # RESTART_BM
        _xid(s, 64.9, "n1", 3, 48),  # WORKFLOW_XID_48 with a row remap: drain and reset
        _xid(s, 65.2, "n1", 3, 63),
        # an IGNORE Xid repeated past gpu.xid_ignore_repeats (3) within the 30 s window
        *[_xid(s, 66.0 + 4.3 * i, "n2", 0, 92) for i in range(4)],
        _xid(  # a derivative line follows the Xid it names
            s,
            67.4,
            "n2",
            1,
            45,
            "NVRM: Xid (PCI:0000:1b:00): 45, pid=2231, name=python, Ch 00000008, "
            "caused by previous Xid 79",
        ),
        _xid(  # Xid 154 carries its own recovery action
            s,
            68.8,
            "n2",
            2,
            154,
            "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to "
            "0x1 (GPU Reset Required)",
        ),
        _xid(s, 69.5, "n2", 3, 999),  # not in the catalog: kept, named, action unknown
    ]
    store.insert(GPU_EVENT, GPU_EVENT.to_arrow(rows))
    run(store, s, minutes=4)
    got = _by_subject(store)
    assert {k: (v["severity"], v["evidence"]["action"]) for k, v in got.items()} == {
        "n1/gpu0": ("info", "IGNORE"),
        "n1/gpu1": ("warning", "RESTART_APP"),
        "n1/gpu2": ("critical", "RESTART_BM"),
        "n1/gpu3": ("critical", "WORKFLOW_XID_48"),
        "n2/gpu0": ("warning", "IGNORE"),
        "n2/gpu1": ("critical", "RESTART_BM"),
        "n2/gpu2": ("critical", "RESET_GPU"),
        "n2/gpu3": ("warning", None),
    }
    ev = got["n1/gpu3"]["evidence"]
    assert ev["xids"] == [48, 63] and ev["workflow_step"] == "DRAIN_AND_RESET"
    assert ev["xid_label"] == "Xid 48 ROBUST_CHANNEL_GPU_ECC_DBE"
    assert got["n2/gpu1"]["evidence"]["action_from"] == "caused by previous Xid 79"
    assert got["n2/gpu2"]["evidence"]["action_from"] == "Xid 154: GPU Reset Required"
    assert got["n2/gpu3"]["evidence"]["xid_label"] == "Xid 999 (not in NVIDIA's Xid catalog)"
    assert got["n2/gpu0"]["evidence"]["repeated"] is True
    assert got["n1/gpu0"]["evidence"]["repeated"] is False
    assert "ROBUST_CHANNEL_CONTAINED_ERROR" in got["n1/gpu1"]["summary"]

    incs = {i["root_subject"]: i for i in incident_store.read(store, cluster="c")}
    # the lone IGNORE Xid opened no incident; every other GPU did, with its action's advice
    assert set(incs) == set(got) - {"n1/gpu0"}
    restart_app = incs["n1/gpu1"]["remediation"]
    assert "RESTART_APP" in restart_app and "checkpoint" in restart_app
    assert not DRAIN.search(restart_app), restart_app
    assert not DRAIN.search(incs["n2/gpu0"]["remediation"]), incs["n2/gpu0"]["remediation"]
    assert "IGNORE" in incs["n2/gpu0"]["remediation"]
    assert "reboot" in incs["n1/gpu2"]["remediation"] and DRAIN.search(
        incs["n1/gpu2"]["remediation"]
    )
    assert "nvidia-smi -r -i 2" in incs["n2/gpu2"]["remediation"]
    assert "DRAIN_AND_RESET" in incs["n1/gpu3"]["remediation"]
    assert "no action is known" in incs["n2/gpu3"]["remediation"]


def test_an_ignore_xid_below_the_repeat_threshold_stays_quiet_over_time(store: Store) -> None:
    s = t0()
    # Xid 63 twice, 40 s apart: never 3 in one 30 s window; later, three within 15 s
    quiet = [_xid(s, 61.9, "n1", 4, 63), _xid(s, 101.4, "n1", 4, 63)]
    burst = [_xid(s, 250.0 + 7.1 * i, "n1", 4, 63) for i in range(3)]
    store.insert(GPU_EVENT, GPU_EVENT.to_arrow(quiet + burst))
    run(store, s, minutes=6)
    fs = sorted(fstore.read(store, kinds=["gpu_xid"]), key=lambda f: f["first_seen"])
    assert len(fs) == 2 and fs[0]["severity"] == "info"
    assert fs[0]["last_seen"] < s.replace(tzinfo=None) + timedelta(seconds=250)
    # only the burst paged: one incident, rooted at the repeated finding, whose advice stays
    # the repeated one after the burst left the window
    (inc,) = incident_store.read(store, cluster="c")
    assert (inc["root_subject"], inc["root_finding_id"]) == ("n1/gpu4", fs[1]["finding_id"])
    assert inc["severity"] == "warning"
    assert "logged 3 times" in inc["remediation"], inc["remediation"]
    assert not DRAIN.search(inc["remediation"]), inc["remediation"]


def test_a_gpu_with_several_xids_follows_the_strongest(store: Store) -> None:
    s = t0()
    store.insert(
        GPU_EVENT,
        GPU_EVENT.to_arrow(
            [_xid(s, 61.0, "n1", 5, 13), _xid(s, 62.2, "n1", 5, 63), _xid(s, 63.0, "n1", 5, 95)]
        ),
    )
    run(store, s, minutes=3)
    (f,) = {f["subject"]: f for f in fstore.read(store, kinds=["gpu_xid"])}.values()
    assert f["evidence"]["action"] == "RESET_GPU" and f["severity"] == "critical"
    assert f["evidence"]["mnemonics"] == [
        "Xid 13 ROBUST_CHANNEL_GR_EXCEPTION / ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY",
        "Xid 63 INFOROM_DRAM_RETIREMENT_EVENT",
        "Xid 95 ROBUST_CHANNEL_UNCONTAINED_ERROR",
    ]
    assert timedelta(0) < f["last_seen"] - f["first_seen"] < timedelta(minutes=1)


def test_alertmanager_and_the_job_report_carry_the_catalog_action(store: Store) -> None:
    from telemetry.config import AlertmanagerConfig
    from telemetry.correlate import Correlator
    from telemetry.correlate.alertmanager import AlertmanagerSink
    from telemetry.correlate.report import _remediations

    s = t0()
    rows = [_xid(s, 61.3, "n1", 0, 94), _xid(s, 62.0, "n1", 1, 79), _xid(s, 62.5, "n1", 2, 63)]
    store.insert(GPU_EVENT, GPU_EVENT.to_arrow(rows))
    corr = Correlator(store, cluster="c")
    corr.run(s, s + timedelta(seconds=90))
    assert corr.incidents.open is not None
    sink = AlertmanagerSink(AlertmanagerConfig(enabled=True, url="http://127.0.0.1:9"), "c")
    sink.offer(corr.incidents.open.values())
    notes = {a["labels"]["subject"]: a["annotations"] for a in sink.pending.values()}
    # the IGNORE Xid pages no one; the others carry the catalog's word
    assert {k: v["action"] for k, v in notes.items()} == {
        "n1/gpu0": "RESTART_APP",
        "n1/gpu1": "RESTART_BM",
    }
    assert not DRAIN.search(notes["n1/gpu0"]["remediation"])

    lines = _remediations(fstore.read(store, kinds=["gpu_xid"]), "team/job")
    assert {r["subject"]: r["action"] for r in lines} == {
        "n1/gpu0": "RESTART_APP",
        "n1/gpu1": "RESTART_BM",
        "n1/gpu2": "IGNORE",
    }


JITTER = (3.1, -2.4, 0.7, 4.2, -3.8, 1.9, -0.6, 2.8, -4.1, 0.2)  # seconds off the 10 s grid


def _samples(store: Store, s: datetime, n: int, *gpus: Any, kind: RecordKind = GPU_SAMPLE) -> None:
    """n NVML samples of each GPU (gpus: callables step -> row), about 10 s apart but off the
    grid, each GPU with its own offset, as real collection gives (`kind`: nvlink_sample for a
    GPU's links, each link a callable of its own)."""
    rows = []
    for g, make in enumerate(gpus):
        for i in range(n):
            at = i * 10 + JITTER[(i + 3 * g) % len(JITTER)] + 0.37 * g + 5
            rows.append({"ts": ms(s) + int(at * 1000), "cluster": "c", "up": 1, **make(i)})
    store.insert(kind, kind.to_arrow(rows))


def _findings(store: Store, kind: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for f in sorted(fstore.read(store, kinds=[kind]), key=lambda f: f["first_seen"]):
        out.setdefault(f["subject"], f)
    return out


def test_gpu_memory_degraded_from_row_remapping_and_ecc(store: Store) -> None:
    s = t0()
    gpu = lambda n, **kw: lambda i: {"node": "n1", "gpu": n, **{k: v(i) for k, v in kw.items()}}  # noqa: E731
    _samples(
        store,
        s,
        30,
        gpu(0, remapped_rows_pending=lambda i: int(i >= 12)),  # a remap pending: reset
        gpu(1, remapped_rows_failure_total=lambda i: int(i >= 15)),  # remapping failed
        gpu(2, retired_pages_pending=lambda i: int(i >= 20)),
        # correctable errors grow, one uncorrectable (Xid 48's, judged by gpu_xid): healthy
        gpu(3, ecc_corrected_errors_total=lambda i: 40 * i,
            ecc_uncorrected_errors_total=lambda i: int(i >= 9)),
        # uncorrectable errors repeating: 3 within a few samples
        gpu(4, ecc_uncorrected_errors_total=lambda i: min(max(i - 16, 0), 3)),
        # an exporter restart resets the volatile counter: not an error
        gpu(5, ecc_uncorrected_errors_total=lambda i: 7 if i < 14 else 0),
    )  # fmt: skip
    run(store, s, 5)
    got = _findings(store, "gpu_memory_degraded")
    assert {k: (f["severity"], f["evidence"]["conditions"]) for k, f in got.items()} == {
        "n1/gpu0": ("warning", ["row remap pending"]),
        "n1/gpu1": ("critical", ["row remapping failed (1x)"]),
        "n1/gpu2": ("warning", ["page retirement pending"]),
        "n1/gpu4": ("warning", ["2 uncorrectable ECC errors"]),
    }
    # the pending remap is seen from the first sample that shows it (~125 s), not before
    assert got["n1/gpu0"]["first_seen"] - s.replace(tzinfo=None) < timedelta(seconds=140)
    assert got["n1/gpu0"]["first_seen"] - s.replace(tzinfo=None) > timedelta(seconds=115)
    incs = {i["root_subject"]: i["remediation"] for i in incident_store.read(store, cluster="c")}
    assert "nvidia-smi -r -i 0" in incs["n1/gpu0"] and "RESET_GPU" in incs["n1/gpu0"]
    assert "RMA" in incs["n1/gpu1"]


def test_a_pending_row_remap_with_no_xid_line_is_reset_gpu(store: Store) -> None:
    """HBM's most common fault in a fleet: a row remap recorded, waiting for a reset, and no Xid
    in the log (Xid 63 is IGNORE, and a driver may log none). Only NVML's row-remapper says so;
    railscope must still ask for the reset, never for a reboot or an RMA."""
    s = t0()
    _samples(
        store,
        s,
        30,
        lambda i: {"node": "n4", "gpu": 6, "remapped_rows_pending": int(i >= 8),
                   "remapped_rows_correctable_total": 1 if i >= 8 else 0},
        lambda i: {"node": "n4", "gpu": 5, "remapped_rows_correctable_total": 2},  # remapped, done
    )  # fmt: skip
    run(store, s, 5)
    assert store.count(GPU_EVENT) == 0  # no Xid line, no NVML event
    assert _findings(store, "gpu_xid") == {}
    got = _findings(store, "gpu_memory_degraded")
    assert set(got) == {"n4/gpu6"}
    f = got["n4/gpu6"]
    assert f["evidence"]["action"] == "RESET_GPU" and f["evidence"]["remap_pending"] is True
    assert f["evidence"]["conditions"] == ["row remap pending"]
    (inc,) = [i for i in incident_store.read(store, cluster="c") if i["root_subject"] == "n4/gpu6"]
    assert inc["root_kind"] == "gpu_memory_degraded"
    assert "RESET_GPU" in inc["remediation"] and "nvidia-smi -r -i 6" in inc["remediation"]
    assert not re.search(r"\b(reboot|RMA)\b", inc["remediation"]), inc["remediation"]


def test_nvlink_errors_name_the_link_against_its_own_baseline(store: Store) -> None:
    s = t0()

    def link(gpu: int, n: int, replay: Any, crc: Any = lambda i: 0) -> Any:
        return lambda i: {
            "node": "n2",
            "gpu": gpu,
            "uuid": f"GPU-n2-{gpu}",
            "link": n,
            "replay_errors_total": replay(i),
            "crc_data_errors_total": crc(i),
            "crc_flit_errors_total": 0,
            "recovery_errors_total": 0,
        }

    quiet = lambda i: 0  # noqa: E731
    _samples(
        store,
        s,
        60,
        link(0, 0, lambda i: 20 * i),  # always ~2 replays/s: its own normal
        link(0, 1, quiet),
        link(1, 0, quiet),
        link(1, 3, quiet, lambda i: 0 if i < 45 else 250 * (i - 45)),  # CRC errors start
        link(1, 4, quiet, lambda i: 0 if i < 45 else 40 * (i - 45)),  # ... and fewer here
        # link 2 of GPU 2: 2/s -> 30/s; link 0 of GPU 2 logs 8/s all along, its own normal,
        # which on the GPU's sum over links would hide the rise (10/s -> 38/s: below 5x)
        link(2, 2, lambda i: 20 * i if i < 45 else 20 * 45 + 300 * (i - 45)),
        link(2, 0, lambda i: 80 * i),
        link(3, 1, lambda i: 10_000 + i if i < 40 else i - 40),  # counter reset, ~0.1/s
        kind=NVLINK_SAMPLE,
    )
    # judged to 540 s: by 600 s link 4's 600 s baseline holds 150 s of its rise, and its rate
    # (4/s, every delta of the window counted from the lead sample on) is no longer 5x above it
    run(store, s, 9)
    got = _findings(store, "nvlink_errors")
    assert set(got) == {"n2/gpu1", "n2/gpu2"}
    ev1, ev2 = got["n2/gpu1"]["evidence"], got["n2/gpu2"]["evidence"]
    # (the stored version is the finding's last: its baseline has caught some of the rise)
    assert (ev1["link"], ev1["links"], ev1["errors"]) == (3, [3, 4], ["CRC (data)"])
    assert 15 < ev1["errors_per_second"]["CRC (data)"] < 40
    assert ev1["baseline_per_second"]["CRC (data)"] * 5 < ev1["errors_per_second"]["CRC (data)"]
    assert [x["link"] for x in ev1["per_link"]] == [3, 4]
    assert ev1["per_link"][1]["errors_per_second"]["CRC (data)"] < 8
    assert (ev2["link"], ev2["links"], ev2["errors"]) == (2, [2], ["replay"])
    assert ev2["baseline_per_second"]["replay"] > 1.5
    assert ev2["baseline_per_second"]["replay"] * 5 < ev2["errors_per_second"]["replay"]
    summary = got["n2/gpu1"]["summary"]
    assert summary.startswith("GPU 1 on n2: NVLink link 3 CRC (data)") and "also link 4" in summary
    # onset at ~450 s: found within the next rate window, not before
    onset = s.replace(tzinfo=None) + timedelta(seconds=450)
    assert onset < got["n2/gpu1"]["first_seen"] < onset + timedelta(seconds=45)
    rem = {i["root_subject"]: i["remediation"] for i in incident_store.read(store, cluster="c")}
    assert "link 3" in rem["n2/gpu1"] and "nvidia-smi nvlink -e -i 1" in rem["n2/gpu1"]


def test_pcie_replays_per_minute(store: Store) -> None:
    s = t0()
    gpu = lambda n, f: lambda i: {"node": "n3", "gpu": n, "pcie_replay_total": f(i)}  # noqa: E731
    _samples(
        store,
        s,
        30,
        gpu(0, lambda i: i),  # ~6 a minute: under DCGM's 8
        gpu(1, lambda i: 3 * i if i >= 10 else 0),  # ~18 a minute from 100 s
        gpu(2, lambda i: 5000 if i < 12 else 2),  # a reset to a low value: no replays
    )
    run(store, s, 5)
    got = _findings(store, "pcie_replays")
    assert set(got) == {"n3/gpu1"}
    assert 12 < got["n3/gpu1"]["evidence"]["replays_per_minute"] < 26


def _kernel(store: Store, s: datetime, node: str, *lines: tuple[float, str]) -> None:
    """Kernel log lines (at seconds from s) of `node` as the log source stores them: each line
    through the real grammar (a multi-line NVRM record becomes one event), kept if it matched."""
    session, rows = grammar.Session(), []
    for n, (at_s, text) in enumerate(lines, 1):
        ev = session.match(text, n)
        if ev is None:
            continue
        rows.append({"ts": ms(s) + int(at_s * 1000), "cluster": "c", "node": node,
                     "namespace": "", "pod": "", "pod_uid": "", "container": "",
                     "source": "kmsg", "kind": ev.kind, "fields": json.dumps(ev.fields),
                     "excerpt": text, "file": "", "line": n})  # fmt: skip
    store.insert(LOG_EVENT, LOG_EVENT.to_arrow(rows))


def test_kernel_xid_lines_are_judged_with_their_own_text(store: Store) -> None:
    """The kernel log's Xid lines reach gpu_xid, each on the GPU at its PCI address: Xid 154's
    recovery action (NVML's event carries no text) decides the action; an Xid seen by NVML and
    the kernel both counts once; a line whose GPU is not sampled is not guessed at."""
    s = t0()
    bus = {0: "0000:1b:00.0", 1: "00000000:3B:00.0", 2: "0000:5d:00.0"}  # NVML's two spellings
    _samples(store, s, 30, *[lambda i, g=g: {"node": "n6", "gpu": g, "pci_bus_id": bus[g]}
                             for g in bus])  # fmt: skip
    store.insert(GPU_EVENT, GPU_EVENT.to_arrow([_xid(s, 92.4, "n6", 0, 94, "XID 94")]))
    _kernel(
        store,
        s,
        "n6",
        (92.6, "NVRM: Xid (PCI:0000:1b:00): 94, pid=7194, name=python3, Contained: CE User "
               "Channel (0x9). RST: No, D-RST: No"),
        (121.3, "NVRM: Xid (PCI:0000:3b:00): 48, pid='<unknown>', name=<unknown>, An "
                "uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer "
                "at partition 3, subpartition 0."),
        (121.4, "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) "
                "to 0x2 (Node Reboot Required)"),
        (133.9, "NVRM: Xid (PCI:0000:5d:00 GPU-I:05 GPU-CI:01): 31, pid=3000, name=python, Ch "
                "00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS"),
        (140.2, "NVRM: Xid (PCI:0000:e1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen "
                "off the bus."),  # no GPU sampled at e1: no finding
    )  # fmt: skip
    run(store, s, 5)
    got = _by_subject(store)
    assert {k: (v["evidence"]["action"], v["evidence"]["events"]) for k, v in got.items()} == {
        "n6/gpu0": ("RESTART_APP", 1),  # NVML's event and the kernel's line: one Xid
        "n6/gpu1": ("RESTART_BM", 2),
        "n6/gpu2": ("RESTART_APP", 1),  # a MIG instance's Xid: its GPU's
    }
    ev = got["n6/gpu1"]["evidence"]
    assert ev["xids"] == [48, 154] and ev["action_from"] == "Xid 154: Node Reboot Required"
    assert got["n6/gpu1"]["severity"] == "critical"
    assert _findings(store, "gpu_lost") == {}  # an Xid 79 line for no known GPU: not guessed


def test_a_gpu_lost_without_an_xid_from_nvml_or_the_kernels_multi_line_form(store: Store) -> None:
    """A GPU that falls off the bus and logs no Xid: NVML answers GPU_IS_LOST (its samples up=0),
    or the kernel prints its three-record form (driver 570+) while the exporter still reports the
    GPU. Either is gpu_lost, with Xid 79's action, RESTART_BM; no gpu_xid is made up for it."""
    s = t0()
    _samples(
        store,
        s,
        30,
        lambda i: {"node": "n5", "gpu": 0, "pci_bus_id": "0000:18:00.0", "up": int(i < 12)},
        lambda i: {"node": "n5", "gpu": 1, "pci_bus_id": "0000:b3:00.0"},
        lambda i: {"node": "n5", "gpu": 2, "pci_bus_id": "0000:db:00.0"},  # healthy
    )
    _kernel(
        store,
        s,
        "n5",
        (151.7, "NVRM: The NVIDIA GPU 0000:b3:00.0"),
        (151.7, "NVRM: (PCI ID: 10de:2330) installed in this system has"),
        (151.7, "NVRM: fallen off the bus and is not responding to commands."),
    )
    run(store, s, 5)
    assert store.count(GPU_EVENT) == 0 and _findings(store, "gpu_xid") == {}
    got = _findings(store, "gpu_lost")
    assert set(got) == {"n5/gpu0", "n5/gpu1"}
    assert got["n5/gpu0"]["evidence"]["down_samples"] > 0
    assert got["n5/gpu1"]["evidence"] == {**got["n5/gpu1"]["evidence"], "down_samples": 0}
    assert got["n5/gpu1"]["evidence"]["lost_events"] >= 1
    assert {f["evidence"]["action"] for f in got.values()} == {"RESTART_BM"}
    # seen from the first sample that says so (~125 s) and from the kernel's record (~152 s)
    assert timedelta(seconds=115) < got["n5/gpu0"]["first_seen"] - s.replace(tzinfo=None)
    assert got["n5/gpu1"]["first_seen"] - s.replace(tzinfo=None) < timedelta(seconds=170)
    incs = {i["root_subject"]: i["remediation"] for i in incident_store.read(store, cluster="c")}
    assert "RESTART_BM" in incs["n5/gpu1"] and "reboot it" in incs["n5/gpu1"]
