"""The log source on real files in temporary directories: CRI P/F joining, identity from the path,
rotation by rename and copytruncate, restarts from the checkpoint, the per-pod token bucket, bad
input, the kernel log through a fake /dev/kmsg that follows the device's semantics."""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from exporters.common.tail import Checkpoints
from exporters.logs.config import LogsConfig
from exporters.logs.formats import sniff
from exporters.logs.kmsg import DevKmsg
from exporters.logs.source import LogsSource, pod_identity

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"

IB12 = (
    "hostname-test:984:1357 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer "
    "172.36.143.59<44206> with status=12 opcode=129 len=65536 vendor err 129 (Recv) localGid "
    "::ffff:29.87.88.182 remoteGids::ffff:29.87.4.221"
)
SOCKET = "c39f5cf046aa:4533:4667 [0] NCCL INFO Using network Socket"
CHATTER = "hostname-test:983:1261 [3] NCCL INFO Connected NVLS tree"


def cri(msg: str, i: int = 0, tag: str = "F", stream: str = "stdout") -> str:
    return f"2026-03-01T10:00:{i % 60:02d}.123456789Z {stream} {tag} {msg}\n"


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def pod_log(
    root: Path, ns: str = "team-a", pod: str = "trainer-0", uid: str = "u1", c: str = "main"
) -> Path:
    d = root / f"{ns}_{pod}_{uid}" / c
    d.mkdir(parents=True, exist_ok=True)
    return d / "0.log"


def source(tmp_path: Path, **kw: object) -> LogsSource:
    cfg = LogsConfig(
        pods_dir=str(tmp_path / "pods"), kmsg="", from_start=True, node_name="n1", **kw
    )  # type: ignore[arg-type]
    return LogsSource(
        cfg, checkpoints=Checkpoints(tmp_path / "state.json"), cluster="c1", clock=FakeClock()
    )


def rows(src: LogsSource) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for b in src.collect():
        out += b.table.to_pylist()
    return out


def test_pod_identity_from_path() -> None:
    p = Path("/var/log/pods/team-a_trainer-0_6f1c-22aa/pytorch/3.log")
    ident = pod_identity(p)
    assert ident is not None
    assert (ident.namespace, ident.pod, ident.uid, ident.container) == (
        "team-a",
        "trainer-0",
        "6f1c-22aa",
        "pytorch",
    )
    assert pod_identity(Path("/tmp/x/y.log")) is None


def test_cri_partial_lines_are_joined_and_identity_is_the_paths(tmp_path: Path) -> None:
    f = pod_log(tmp_path / "pods")
    cut = IB12.index("43.59")
    f.write_text(
        cri(CHATTER, 0)
        + cri(IB12[:cut], 1, "P")
        + cri("namespace=evil pod=other " + CHATTER, 2, "F", "stderr")  # the other stream between
        + cri(IB12[cut:], 3, "F")
        + cri(SOCKET, 4)
    )
    got = rows(source(tmp_path))
    assert [r["kind"] for r in got] == ["ib_completion_error", "nccl_net_selected"]
    ib = got[0]
    assert json.loads(str(ib["fields"]))["peer_ip"] == "172.36.143.59"
    assert ib["line"] == 2  # where the joined record starts
    assert ib["ts"] == datetime(
        2026, 3, 1, 10, 0, 1, 123000, tzinfo=UTC
    )  # ms: the column's precision
    assert (ib["namespace"], ib["pod"], ib["pod_uid"], ib["container"]) == (
        "team-a",
        "trainer-0",
        "u1",
        "main",
    )
    assert (ib["node"], ib["cluster"], ib["source"]) == ("n1", "c1", "cri")
    assert got[1]["line"] == 5


def test_rename_rotation_finishes_the_old_file_and_reads_the_new(tmp_path: Path) -> None:
    f = pod_log(tmp_path / "pods")
    f.write_text(cri(SOCKET, 0) + cri(CHATTER, 1))
    src = source(tmp_path)
    assert [r["line"] for r in rows(src)] == [1]
    with f.open("a") as fh:  # written before the rename, read after it
        fh.write(cri(CHATTER, 2) + cri(IB12, 3))
    f.rename(f.with_name("0.log.20260301-100004"))
    f.write_text(cri(SOCKET, 5))
    got = rows(src)
    assert sorted((Path(str(r["file"])).name, r["line"], r["kind"]) for r in got) == [
        ("0.log", 1, "nccl_net_selected"),
        ("0.log.20260301-100004", 4, "ib_completion_error"),
    ]
    assert rows(src) == []  # nothing twice


def test_copytruncate_restarts_the_file_and_is_counted(tmp_path: Path) -> None:
    f = pod_log(tmp_path / "pods")
    f.write_text(cri(SOCKET, 0) + cri(CHATTER, 1) + cri(CHATTER, 2))
    src = source(tmp_path)
    assert len(rows(src)) == 1
    with f.open("r+") as fh:  # logrotate copytruncate: the same inode, cut to 0, written again
        fh.truncate(0)
    f.write_text(cri(IB12, 3))
    got = rows(src)
    assert [(r["kind"], r["line"]) for r in got] == [("ib_completion_error", 1)]
    assert src.stats.errors.get("file_truncated") == 1


def test_restart_resumes_from_the_checkpoint_without_loss_or_duplicate(tmp_path: Path) -> None:
    f = pod_log(tmp_path / "pods")
    f.write_text(cri(SOCKET, 0) + cri(CHATTER, 1))
    with f.open("a") as fh:
        fh.write(cri(IB12, 2)[:40])  # a line still being written at the stop
    first = source(tmp_path)
    assert [r["line"] for r in rows(first)] == [1]
    state = json.loads((tmp_path / "state.json").read_text())
    (entry,) = state["files"].values()
    assert entry["line"] == 2 and entry["offset"] == len(cri(SOCKET, 0) + cri(CHATTER, 1))
    with f.open("a") as fh:
        fh.write(cri(IB12, 2)[40:] + cri(SOCKET, 3))
    again = source(tmp_path)  # a new process: only the checkpoint carries over
    got = rows(again)
    assert [(r["kind"], r["line"]) for r in got] == [
        ("ib_completion_error", 3),
        ("nccl_net_selected", 4),
    ]


def test_first_start_without_from_start_begins_at_the_end(tmp_path: Path) -> None:
    f = pod_log(tmp_path / "pods")
    f.write_text(cri(SOCKET, 0) + cri(CHATTER, 1))
    src = LogsSource(
        LogsConfig(pods_dir=str(tmp_path / "pods"), kmsg=""),
        checkpoints=Checkpoints(tmp_path / "s.json"),
    )
    assert rows(src) == []
    with f.open("a") as fh:
        fh.write(cri(IB12, 2))
    assert [r["line"] for r in rows(src)] == [3]  # numbering counts the lines it skipped


def test_token_bucket_keeps_a_flooding_pod_from_starving_the_others(tmp_path: Path) -> None:
    pods = tmp_path / "pods"
    noisy = pod_log(pods, pod="noisy-0", uid="u9")
    quiet = pod_log(pods, pod="quiet-0", uid="u2")
    noisy.write_text("".join(cri(SOCKET if i % 10 == 0 else CHATTER, i) for i in range(10_000)))
    quiet.write_text("".join(cri(SOCKET, i) for i in range(10)))
    src = source(tmp_path, rate_lines_per_second=100.0, rate_burst_lines=100)
    got = rows(src)
    by_pod = {p: sum(1 for r in got if r["pod"] == p) for p in ("noisy-0", "quiet-0")}
    assert by_pod == {"noisy-0": 10, "quiet-0": 10}  # the first 100 of noisy's lines: 10 matches
    assert src.stats.errors["rate_limited"] == 9_900
    assert src.stats.dropped == 9_900
    assert src.stats.received == 10_010  # every line is counted, read or dropped


def test_pod_directory_deleted_while_followed(tmp_path: Path) -> None:
    pods = tmp_path / "pods"
    gone = pod_log(pods, pod="gone-0", uid="u3")
    stays = pod_log(pods, pod="stays-0", uid="u4")
    gone.write_text(cri(CHATTER, 0) * 40_000)  # more than one cycle's read budget
    stays.write_text(cri(CHATTER, 0))
    src = source(tmp_path, max_read_bytes_per_cycle=1 << 20)
    assert rows(src) == []
    shutil.rmtree(gone.parent.parent)  # with 2 MiB of it unread
    with stays.open("a") as fh:
        fh.write(cri(SOCKET, 1))
    got = rows(src)
    assert [(r["pod"], r["line"]) for r in got] == [("stays-0", 2)]
    assert src.stats.errors["file_vanished"] == 1
    # a file read to its end and then removed (a rotation compressed away) loses nothing: quiet
    stays.rename(stays.with_name("0.log.20260301-100000"))
    rows(src)
    stays.with_name("0.log.20260301-100000").unlink()
    assert rows(src) == []
    assert src.stats.errors["file_vanished"] == 1


def test_bad_input_is_counted_and_the_rest_is_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    f = pod_log(tmp_path / "pods")
    with f.open("wb") as fh:
        fh.write(b"\x00\x01\xff\xfe garbage NCCL WARN \x00 binary\n")  # binary garbage
        fh.write(cri(SOCKET, 1).encode())
        fh.write(
            b"2026-03-01T10:00:02.0Z stdout F " + b"x" * (10 * 1024 * 1024) + IB12.encode() + b"\n"
        )  # 10 MB
        fh.write(cri(SOCKET, 3).encode())
        fh.write(
            cri(IB12, 4).encode().replace(b"hostname-test", b"host\xc3\x28name")
        )  # invalid UTF-8
        fh.write(b"2026-13-45T99:00:00.0Z stdout F " + SOCKET.encode() + b"\n")  # bad timestamp
        fh.write(cri(SOCKET, 6).encode())
    src = source(tmp_path)
    got = rows(src)
    assert [(r["kind"], r["line"]) for r in got] == [
        ("nccl_net_selected", 2),
        ("nccl_net_selected", 4),
        ("ib_completion_error", 5),
        ("nccl_net_selected", 7),
    ]
    assert json.loads(str(got[2]["fields"]))["peer_ip"] == "172.36.143.59"
    errors = src.stats.errors
    assert src.stats.received == 7
    assert errors["binary_line"] == 1
    assert errors["line_too_long"] == 1
    assert errors["invalid_utf8"] == 1
    assert errors["bad_timestamp"] == 1
    # each reason's log line names the file it was found in
    named = [r.getMessage() for r in caplog.records if "line_too_long" in r.getMessage()]
    assert named and str(f) in named[0]


def test_a_file_truncated_under_the_reader_mid_line(tmp_path: Path) -> None:
    f = pod_log(tmp_path / "pods")
    f.write_text(cri(CHATTER, 0) * 50)
    src = source(tmp_path)
    rows(src)
    with f.open("r+") as fh:
        fh.truncate(30)  # shorter than what was read, and cut inside a line
    with f.open("a") as fh:
        fh.write("\n" + cri(SOCKET, 1))
    got = rows(src)
    assert [(r["kind"], r["line"]) for r in got] == [("nccl_net_selected", 2)]
    assert src.stats.errors["file_truncated"] == 1


class FakeKmsg:
    """Follows /dev/kmsg: one record per read, None for EAGAIN, BrokenPipeError for an overrun."""

    def __init__(self, items: list[bytes | BaseException]) -> None:
        self.items = list(items)

    def read(self) -> bytes | None:
        if not self.items:
            return None
        item = self.items.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        pass


def proc(tmp_path: Path, btime: int = 1_767_225_600, boot_id: str = "b1") -> Path:
    root = tmp_path / "proc"
    (root / "sys/kernel/random").mkdir(parents=True, exist_ok=True)
    (root / "stat").write_text(f"cpu  1 2 3\nbtime {btime}\nprocesses 9\n")
    (root / "sys/kernel/random/boot_id").write_text(boot_id + "\n")
    return root


def kmsg_source(tmp_path: Path, dev: FakeKmsg) -> LogsSource:
    cfg = LogsConfig(pods_dir="", kmsg="/dev/kmsg", proc_root=str(proc(tmp_path)), node_name="n1")
    return LogsSource(cfg, checkpoints=Checkpoints(tmp_path / "state.json"), kmsg_device=dev)


def test_kmsg_records_get_wall_time_and_survive_an_overrun(tmp_path: Path) -> None:
    dev = FakeKmsg(
        [
            b"6,100,4254197816,-;NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
            b" SUBSYSTEM=pci\n DEVICE=+pci:0000:5d:00.0\n",
            BrokenPipeError(32, "overrun"),
            b"6,140,4300000000,-;NVRM: The NVIDIA GPU 0000:b3:00.0\n",
            b"6,141,4300000001,c;NVRM: (PCI ID: 10de:26b5) installed in this system has\n",
            b"6,142,4300000002,c;NVRM: fallen off the bus and is not responding to commands.\n",
            b"4,143,4300000100,-;mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE\n",
        ]
    )
    src = kmsg_source(tmp_path, dev)
    got = rows(src)
    assert [(r["kind"], r["line"]) for r in got] == [
        ("xid", 100),
        ("gpu_fallen_off_bus", 140),
        ("nic_link_state", 143),
    ]
    boot = datetime.fromtimestamp(1_767_225_600, UTC)
    assert got[0]["ts"] == boot + timedelta(microseconds=4_254_197_000)  # ms precision
    assert (got[0]["source"], got[0]["file"], got[0]["pod"]) == ("kmsg", "", "")
    assert src.stats.errors["kmsg_overrun"] == 1


def test_kmsg_restart_skips_records_read_before(tmp_path: Path) -> None:
    recs: list[bytes | BaseException] = [
        b"6,7,1000000,-;mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE\n",
        b"6,8,2000000,-;mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link DOWN\n",
    ]
    first = kmsg_source(tmp_path, FakeKmsg(recs))
    assert len(rows(first)) == 2
    # a restarted source reads the ring buffer from its oldest record again
    again = kmsg_source(
        tmp_path, FakeKmsg([*recs, b"6,9,3000000,-;igc 0000:05:00.0 eth5: NIC Link is Down\n"])
    )
    assert [r["line"] for r in rows(again)] == [9]
    assert "kmsg_overrun" not in again.stats.errors
    # records 10-11 overwritten in the ring buffer before a restart read them: counted
    later = kmsg_source(
        tmp_path, FakeKmsg([b"6,12,4000000,-;igc 0000:05:00.0 eth5: NIC Link is Up\n"])
    )
    assert [r["line"] for r in rows(later)] == [12]
    assert later.stats.errors["kmsg_overrun"] == 1


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("nccl-2.2x-ib-status.log", "text"),
        ("torch-watchdog.log", "text"),
        ("dmesg-xid-fallen.txt", "dmesg"),
        ("dmesg-fallen-no-xid.txt", "dmesg"),
        ("dmesg-aer-mlx5.txt", "dmesg"),
        ("journalctl-k-mlx5.txt", "journal"),
    ],
)
def test_formats_are_recognised_by_content(name: str, fmt: str) -> None:
    assert sniff((FIXTURES / name).read_bytes()) == fmt


def test_cri_and_kmsg_are_recognised_by_content() -> None:
    assert sniff(cri(SOCKET).encode() * 3) == "cri"
    assert sniff(b"6,1,100,-;hello\n SUBSYSTEM=pci\n4,2,200,-;x\n") == "kmsg"
    assert (
        sniff(b"2026-03-01T10:00:00Z " + SOCKET.encode() + b"\n") == "text"
    )  # kubectl --timestamps


def test_from_reads_a_dmesg_capture_anchored_at_its_mtime(tmp_path: Path) -> None:
    f = tmp_path / "dmesg.txt"
    shutil.copy(FIXTURES / "dmesg-xid-fallen.txt", f)
    mtime = 1_780_000_000
    os.utime(f, (mtime, mtime))
    src = LogsSource(LogsConfig(), from_path=str(f))
    got = rows(src)
    assert [(r["kind"], r["line"]) for r in got] == [("xid", 3), ("gpu_fallen_off_bus", 4)]
    # the last timed line (4254.197913) was written at the file's mtime; the Xid 53 us before
    # it, stored at the column's millisecond precision
    assert got[0]["ts"] == datetime.fromtimestamp(mtime, UTC) - timedelta(milliseconds=1)
    assert src.node_name == ""


def test_excerpt_is_bounded_and_redacted(tmp_path: Path) -> None:
    f = pod_log(tmp_path / "pods")
    secret = (
        "NCCL WARN auth failed: token=ghp_abcdefghijklmnop1234 Authorization: Bearer abcdefgh12345678 "
        "url=https://user:hunter2@registry.example.com/x " + "y" * 1000
    )
    f.write_text(cri(secret, 0))
    (r,) = rows(source(tmp_path))
    assert r["kind"] == "nccl_warn"
    ex = str(r["excerpt"])
    assert len(ex) == 512
    assert (
        "ghp_abcdefghijklmnop1234" not in ex
        and "abcdefgh12345678" not in ex
        and "hunter2" not in ex
    )
    assert ex.startswith("NCCL WARN auth failed: token=<redacted> Authorization: <redacted>")


def test_from_a_pods_tree_keeps_identity_from_the_path(tmp_path: Path) -> None:
    f = pod_log(tmp_path / "copy", ns="team-b", pod="worker-5", uid="9a8b", c="trainer")
    f.write_text(cri(CHATTER, 0) + cri(IB12, 1))
    (tmp_path / "copy" / "notes-from-a-terminal").write_text(SOCKET + "\n")  # plain text, no name
    got = rows(LogsSource(LogsConfig(node_name="gpu-3"), from_path=str(tmp_path / "copy")))
    assert sorted(
        (r["source"], r["namespace"], r["pod"], r["container"], r["line"], r["kind"]) for r in got
    ) == [
        ("cri", "team-b", "worker-5", "trainer", 2, "ib_completion_error"),
        ("text", "", "", "", 1, "nccl_net_selected"),
    ]
    assert {r["node"] for r in got} == {"gpu-3"}


def test_dev_kmsg_turns_epipe_into_an_overrun_and_eagain_into_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the real reader over a stand-in file: read(2) on /dev/kmsg answers EPIPE after the ring
    # buffer overwrote unread records and EAGAIN when none is waiting
    dev = tmp_path / "kmsg"
    dev.write_bytes(b"6,1,10,-;hello\n")
    k = DevKmsg(dev)
    answers: list[bytes | OSError] = [
        OSError(errno.EPIPE, "Broken pipe"),
        b"6,9,20,-;next\n",
        BlockingIOError(errno.EAGAIN, "again"),
        OSError(errno.EIO, "I/O error"),
    ]

    def read(fd: int, n: int) -> bytes:
        a = answers.pop(0)
        if isinstance(a, OSError):
            raise a
        return a

    monkeypatch.setattr(os, "read", read)
    with pytest.raises(BrokenPipeError):
        k.read()
    assert k.read() == b"6,9,20,-;next\n"
    assert k.read() is None
    with pytest.raises(OSError, match="I/O error"):
        k.read()
    monkeypatch.undo()
    k.close()


def test_a_block_of_binary_garbage_between_real_lines(tmp_path: Path) -> None:
    # 256 KiB of random bytes (NULs, stray newlines, anchors sprinkled in) written into a pod's
    # log between two real lines: no event is made of it, and the line after it is read
    rnd = random.Random(45)
    junk = bytearray(rnd.randbytes(256 * 1024))
    for k in range(0, len(junk) - 64, 4096):  # lines a screen would stop at
        junk[k : k + 20] = b"NET/IB : Got complet"
    f = pod_log(tmp_path / "pods")
    with f.open("wb") as fh:
        fh.write(cri(SOCKET, 0).encode())
        fh.write(bytes(junk) + b"\n")
        fh.write(cri(IB12, 2).encode())
    src = source(tmp_path)
    got = rows(src)
    assert [r["kind"] for r in got] == ["nccl_net_selected", "ib_completion_error"]
    assert got[-1]["line"] == src.stats.received  # the last line, counted as every other
    assert src.stats.errors["binary_line"] >= 1
