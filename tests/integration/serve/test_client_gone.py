"""A client that goes away in the middle of its request body (a proxy cut, a killed collector:
found by bench/soak.py) is not an error of the endpoint: no Traceback in its log, and it keeps
answering."""

from __future__ import annotations

import logging
import socket
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
        f"POST {INSERT} HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: 1000000\r\n\r\n",
        f"POST {INSERT} HTTP/1.1\r\nHost: x\r\n{auth}Transfer-Encoding: chunked\r\n\r\n1000\r\n",
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
