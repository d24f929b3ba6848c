"""A client that goes away in the middle of its request body, or before the answer (a proxy cut, a
killed collector: both found by bench/soak.py), is not an error of the endpoint: no Traceback in
its log, one line that names the query, and it keeps answering."""

from __future__ import annotations

import logging
import socket
import struct
import time
import urllib.request

import pytest

from tests.integration.serve.conftest import Endpoint

INSERT = "/?query=INSERT%20INTO%20railscope.flow_samples%20FORMAT%20ArrowStream"


def test_a_request_cut_mid_body_logs_no_traceback(
    endpoint: Endpoint, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    auth = "X-ClickHouse-User: admin\r\nX-ClickHouse-Key: s3cret\r\n"  # the fixture's user
    heads = [
        f"POST {INSERT} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Length: 1000000\r\n\r\n",
        f"POST {INSERT} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Transfer-Encoding: chunked\r\n\r\n1000\r\n",
        # a form (clickhouse-connect sends long queries so) cut inside its first part
        f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Length: 1000000\r\n"
        "Content-Type: multipart/form-data; boundary=b\r\n\r\n"
        '--b\r\nContent-Disposition: form-data; name="query"\r\n\r\nSELECT ',
    ]
    for head in heads:
        with socket.create_connection((endpoint.host, endpoint.port)) as s:
            s.sendall(head.encode() + b"\0" * 3000)
            time.sleep(0.3)
    time.sleep(0.5)
    with urllib.request.urlopen(f"{endpoint.url}/ping", timeout=10) as r:
        assert r.read() == b"Ok.\n"
    tracebacks = [r for r in caplog.records if r.exc_info and r.levelno >= logging.ERROR]
    assert tracebacks == [], [r.getMessage() for r in tracebacks]


@pytest.mark.parametrize("close", ["fin", "rst"])
def test_a_client_gone_before_the_answer_logs_one_line_and_no_traceback(
    endpoint: Endpoint, caplog: pytest.LogCaptureFixture, close: str
) -> None:
    """The client sends a whole query and closes while it runs: the answer finds the transport
    closing (aiohttp's ClientConnectionResetError). CI's soak saw this as a Traceback in serve.log
    when its proxy cut the store away mid-INSERT."""
    caplog.set_level(logging.DEBUG)
    qid = f"gone-{close}"
    before = endpoint.server.stats.snapshot()["errors"].get("client_closed", 0)
    head = (
        f"GET /?query=SELECT%20sleep(1)&query_id={qid} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "X-ClickHouse-User: admin\r\nX-ClickHouse-Key: s3cret\r\n\r\n"
    )
    s = socket.create_connection((endpoint.host, endpoint.port))
    s.sendall(head.encode())
    time.sleep(0.3)  # the query is running
    if close == "rst":
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(qid in r.getMessage() for r in caplog.records):
        time.sleep(0.1)
    gone = [r for r in caplog.records if qid in r.getMessage()]
    assert len(gone) == 1 and gone[0].levelno == logging.WARNING, [r.getMessage() for r in gone]
    assert "closed the connection before the answer" in gone[0].getMessage()
    assert endpoint.server.stats.snapshot()["errors"]["client_closed"] == before + 1
    with urllib.request.urlopen(f"{endpoint.url}/ping", timeout=10) as r:
        assert r.read() == b"Ok.\n"
    tracebacks = [r for r in caplog.records if r.exc_info and r.levelno >= logging.ERROR]
    assert tracebacks == [], [r.getMessage() for r in tracebacks]
