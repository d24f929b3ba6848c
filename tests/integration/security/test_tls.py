"""TLS on the wire, with a certificate generated here:
- /metrics (and /healthz) over HTTPS from `prometheus.tls_cert_file/tls_key_file`: a client that
  trusts the CA reads it, one that does not (or speaks plain HTTP) fails;
- the store over https with `store.ca_cert` (and a client certificate): clickhouse-connect
  reaches the real engine through a TLS endpoint (a TLS terminator in front of `railscope
  serve`'s ClickHouse HTTP endpoint on the session's engine), and fails without the CA, or
  without a client certificate where the server asks for one;
- wrong TLS settings are one line at config load, before anything starts.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from telemetry.config import load_config
from telemetry.errors import ConfigError, StoreUnavailable
from telemetry.serve import Engine, QueryServer
from telemetry.serve.config import ServeConfig
from telemetry.sinks.prometheus import PrometheusSink
from telemetry.store import Store
from tests.integration.core.test_cli import rs
from tests.integration.hdfs.test_jmx_scrape import self_signed


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own CA) and its key."""
    return self_signed(tmp_path_factory.mktemp("tls"))


def _config(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "railscope.yaml"
    p.write_text(text)
    return p


def _get(url: str, ctx: ssl.SSLContext | None = None) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10, context=ctx) as r:
        return r.status, r.read().decode()


def test_metrics_over_https_only_for_clients_that_trust_the_ca(
    cert: tuple[Path, Path], tmp_path: Path
) -> None:
    crt, key = cert
    cfg = load_config(
        _config(tmp_path, f"prometheus:\n  tls_cert_file: {crt}\n  tls_key_file: {key}\n"),
        env={},
    )
    sink = PrometheusSink()
    host, port = sink.serve("127.0.0.1", 0, cfg.prometheus.ssl_context())
    try:
        trusting = ssl.create_default_context(cafile=str(crt))
        status, body = _get(f"https://{host}:{port}/metrics", trusting)
        assert status == 200 and "railscope_component_received_total" in body
        assert _get(f"https://{host}:{port}/healthz", trusting) == (200, "ok\n")
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            _get(f"https://{host}:{port}/metrics", ssl.create_default_context())
        with pytest.raises((urllib.error.URLError, ConnectionError)):  # plain HTTP: no answer
            _get(f"http://{host}:{port}/metrics")
    finally:
        sink.close()
    # without the TLS settings the same server is plain HTTP (the context is what switches it)
    assert (
        load_config(_config(tmp_path, "prometheus: {}\n"), env={}).prometheus.ssl_context() is None
    )


def test_metrics_bearer_token_from_a_file(cert: tuple[Path, Path], tmp_path: Path) -> None:
    """`prometheus.bearer_token_file`: /metrics needs the token (over HTTPS here), /healthz
    stays open for the kubelet's probes."""
    crt, key = cert
    (tmp_path / "token").write_text("s3cr3t-scrape-token\n")
    cfg = load_config(
        _config(
            tmp_path,
            f"prometheus:\n  tls_cert_file: {crt}\n  tls_key_file: {key}\n"
            f"  bearer_token_file: {tmp_path / 'token'}\n",
        ),
        env={},
    )
    sink = PrometheusSink()
    host, port = sink.serve("127.0.0.1", 0, **cfg.prometheus.server_options())
    ctx = ssl.create_default_context(cafile=str(crt))
    url = f"https://{host}:{port}/metrics"

    def get(token: str | None) -> int:
        req = urllib.request.Request(url)
        if token is not None:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
                return int(r.status)
        except urllib.error.HTTPError as e:
            return int(e.code)

    try:
        assert get("s3cr3t-scrape-token") == 200
        assert get(None) == 401 and get("wrong") == 401 and get("s3cr3t-scrape-toke") == 401
        assert _get(f"https://{host}:{port}/healthz", ctx) == (200, "ok\n")
    finally:
        sink.close()
    shown = rs("config", "show", str(tmp_path / "railscope.yaml"))
    assert shown.returncode == 0 and "s3cr3t-scrape-token" not in shown.stdout + shown.stderr


class TlsTerminator:
    """TLS in front of a plain TCP endpoint (as a ClickHouse server's https port is)."""

    def __init__(self, ctx: ssl.SSLContext, target: tuple[str, int]) -> None:
        self.ctx, self.target = ctx, target
        self.loop = asyncio.new_event_loop()
        self.port = 0
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        assert ready.wait(10)

    def _run(self, ready: threading.Event) -> None:
        async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            try:
                while data := await r.read(65536):
                    w.write(data)
                    await w.drain()
            except (ConnectionError, ssl.SSLError):
                pass
            finally:
                if not self.loop.is_closed():
                    w.close()

        async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            ur, uw = await asyncio.open_connection(*self.target)
            await asyncio.gather(pipe(r, uw), pipe(ur, w))

        async def main() -> None:
            server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=self.ctx)
            self.port = server.sockets[0].getsockname()[1]
            ready.set()

        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(main())
        self.loop.run_forever()

    def stop(self) -> None:
        """Stop serving; connections a client keeps open die with the (daemon) thread."""
        self.loop.call_soon_threadsafe(self.loop.stop)


@pytest.fixture(scope="module")
def endpoint(chdb_dsn: str) -> Iterator[tuple[str, int]]:
    store = Store(chdb_dsn)
    assert store.client is not None
    server = QueryServer(Engine(str(store.dsn.path)), ServeConfig(), port=0)
    yield server.start()
    server.stop()
    server.engine.close()


def _server_ctx(crt: Path, key: Path, client_ca: Path | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(crt, key)
    if client_ca:
        ctx.load_verify_locations(cafile=str(client_ca))
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _store(tmp_path: Path, port: int, tls: str) -> Store:
    cfg = load_config(
        _config(tmp_path, f"store:\n  dsn: https://default@127.0.0.1:{port}/default\n{tls}"),
        env={},
    )
    return Store(cfg.store.dsn, connect_timeout=5)


def test_store_over_https_with_a_ca_and_a_client_certificate(
    cert: tuple[Path, Path], endpoint: tuple[str, int], tmp_path: Path
) -> None:
    crt, key = cert
    tls = TlsTerminator(_server_ctx(crt, key), endpoint)
    mtls = TlsTerminator(_server_ctx(crt, key, client_ca=crt), endpoint)
    try:
        good = _store(tmp_path, tls.port, f"  ca_cert: {crt}\n")
        assert good.query_rows("SELECT 40 + 2") == [(42,)]
        with pytest.raises(StoreUnavailable, match="certificate verification failed"):
            _store(tmp_path, tls.port, "").ping()  # the system CAs do not know ours
        # a server that asks for a client certificate
        client = f"  ca_cert: {crt}\n  client_cert: {crt}\n  client_key: {key}\n"
        assert _store(tmp_path, mtls.port, client).query_rows("SELECT 1") == [(1,)]
        with pytest.raises(StoreUnavailable):
            _store(tmp_path, mtls.port, f"  ca_cert: {crt}\n").ping()
    finally:
        tls.stop()
        mtls.stop()


@pytest.mark.parametrize(
    "text,msg",
    [
        ("store:\n  dsn: http://u@h:8123/db\n  ca_cert: {crt}\n", "only with an https:// DSN"),
        ("store:\n  dsn: https://u:pw@h/db\n  ca_cert: /nope.pem\n", "'/nope.pem': No such file"),
        ("store:\n  dsn: https://u@h/db\n  client_key: {key}\n", "client_cert and client_key go"),
        (
            "store:\n  database: 'a; DROP'\n",
            "store.database: store database 'a; DROP': use letters",
        ),
        ("prometheus:\n  tls_cert_file: {crt}\n", "tls_cert_file and tls_key_file go together"),
        ("prometheus:\n  tls_cert_file: {crt}\n  tls_key_file: {crt}\n", "cannot load"),
    ],
)
def test_bad_tls_or_database_settings_are_one_line(
    cert: tuple[Path, Path], tmp_path: Path, text: str, msg: str
) -> None:
    crt, key = cert
    path = _config(tmp_path, text.format(crt=crt, key=key))
    with pytest.raises(ConfigError, match=msg.replace("(", r"\(")):
        load_config(path, env={})
    r = rs("config", "check", str(path))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "pw" not in r.stderr.replace("https://u:***@", "")
