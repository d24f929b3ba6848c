from __future__ import annotations

import os
from pathlib import Path

import pytest

from telemetry.config import load_config
from telemetry.errors import ConfigError
from telemetry.store.dsn import parse_dsn
from telemetry.text import parse_size


def test_chdb_dsn_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    d = parse_dsn("chdb://./data?database=lab")
    assert d.embedded and d.path == str(tmp_path / "data") and d.database == "lab"


def test_default_dsn_comes_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAILSCOPE_DSN", "chdb:///srv/rs")
    assert parse_dsn(None).path == "/srv/rs"
    monkeypatch.delenv("RAILSCOPE_DSN")
    assert parse_dsn(None).path == str(Path("railscope-data").resolve())


def test_server_dsn() -> None:
    d = parse_dsn("https://ops:s%40cret@ch.example:9443/metrics")
    assert (d.scheme, d.host, d.port, d.username, d.password, d.database) == (
        "https",
        "ch.example",
        9443,
        "ops",
        "s@cret",
        "metrics",
    )
    assert "s@cret" not in d.redacted()
    assert parse_dsn("http://ch").port == 8123


@pytest.mark.parametrize(
    "dsn,msg",
    [
        ("mysql://x", "unknown scheme 'mysql'"),
        ("localhost:8123", "expected chdb://PATH"),
        ("chdb://", "a directory path is required"),
        ("http://h:port/db", "port is not a number"),
        ("http://h:8123/bad-name", "use letters, digits and _ only"),
    ],
)
def test_bad_dsns_name_the_problem(dsn: str, msg: str) -> None:
    with pytest.raises(ConfigError, match=msg):
        parse_dsn(dsn)


def test_sizes() -> None:
    assert parse_size("2GiB") == 2 << 30
    assert parse_size("512 MB") == 512_000_000
    assert parse_size(1234) == 1234
    with pytest.raises(ValueError):
        parse_size("lots")


def test_file_env_and_overrides_layer(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(
        "cluster: prod\nsink:\n  batch_rows: 500\n  spool_max_bytes: 64MiB\nstore:\n  ttl_days: {flow_samples: 3}\n"
    )
    cfg = load_config(f, env={})
    assert (
        cfg.cluster == "prod"
        and cfg.sink.batch_rows == 500
        and cfg.sink.spool_max_bytes == 64 << 20
    )
    assert cfg.store.ttl_days == {"flow_samples": 3}
    cfg = load_config(f, env={"RAILSCOPE__SINK__BATCH_ROWS": "700", "RAILSCOPE_DSN": "chdb:///x"})
    assert cfg.sink.batch_rows == 700 and cfg.store.dsn == "chdb:///x"
    cfg = load_config(
        f, env={"RAILSCOPE__SINK__BATCH_ROWS": "700"}, overrides={"sink": {"batch_rows": 9}}
    )
    assert cfg.sink.batch_rows == 9


@pytest.mark.parametrize(
    "text,msg",
    [
        # pydantic words the reason; railscope's part is the key path in front of it
        ("sink:\n  batch_rows: 0\n", "sink.batch_rows: "),
        ("sink:\n  batchrows: 10\n", "sink.batchrows: "),
        ("store:\n  dsn: ftp://x\n", "store.dsn: store DSN 'ftp://x': unknown scheme 'ftp'"),
        ("store:\n  ttl_days: {nope: 3}\n", "store.ttl_days: unknown table 'nope'"),
        ("prometheus:\n  listen: 9580\n", "prometheus.listen"),
        ("sources:\n  frobnicator: {}\n", "sources.frobnicator: unknown source"),
        ("sink: [1, 2\n", "not valid YAML"),
        ("- a\n- b\n", "the top level must be a mapping"),
    ],
)
def test_config_errors_name_the_key(tmp_path: Path, text: str, msg: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(f, env={})
    assert msg in str(e.value)
    assert str(f) in str(e.value)
    assert "\n" not in str(e.value)


def test_missing_config_file() -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config("/nonexistent/railscope.yaml", env={})


def test_env_config_path(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("cluster: from-env-file\n")
    assert load_config(env={"RAILSCOPE_CONFIG": str(f)}).cluster == "from-env-file"
    assert os.environ.get("TZ") == "UTC"


def test_example_config_is_valid_and_matches_defaults() -> None:
    example = Path(__file__).resolve().parents[3] / "examples" / "railscope.yaml"
    cfg = load_config(example, env={})
    default = load_config(None, env={})
    assert cfg.sink == default.sink and cfg.prometheus == default.prometheus
    assert cfg.store.ttl_days == {"flow_samples": 14}


def test_correlate_threshold_overrides_are_checked(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("correlate:\n  thresholds:\n    pfc:\n      storm_pauses_per_second: 100\n")
    assert load_config(f, env={}).correlate.thresholds == {"pfc": {"storm_pauses_per_second": 100}}
    f.write_text("correlate:\n  thresholds:\n    pfc:\n      storm_rate: 100\n")
    with pytest.raises(
        ConfigError, match=r"correlate\.thresholds: thresholds\.pfc\.storm_rate: unknown threshold"
    ):
        load_config(f, env={})


@pytest.mark.parametrize(
    "text,msg",
    [  # shapes tests/unit/core/test_fuzz_config.py found escaping (RecursionError,
        # AttributeError, ValueError) or giving a two-line error. Only railscope's words are
        # pinned: what PyYAML or pydantic say after them changes with their versions (PyYAML
        # 6.0.4's parser refuses the 1,100-deep document itself, in its own words)
        ("sink: &x [*x]\n", "nested deeper than 64 levels (or an anchor holds itself)"),
        ("sink: " + "[" * 1100 + "]" * 1100 + "\n", "bad.yaml"),
        ("sink: {1: x}\n", "sink.1: "),
        ('serve:\n  password_file: "a\\0b"\n', "serve.password_file: 'a\\x00b' is not a file path"),
        ("cluster: a\x00b\n", "bad.yaml: not valid YAML: "),
    ],
    ids=["self-anchor", "deep", "int-key", "nul-path", "nul-char"],
)
def test_config_shapes_found_by_the_fuzzer_are_one_line_errors(
    tmp_path: Path, text: str, msg: str
) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(f, env={})
    assert msg in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("depth", [65, 1100])
def test_a_document_nested_too_deeply_is_one_line_naming_the_file_and_exit_2(
    tmp_path: Path, depth: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whoever refuses it (railscope's depth check at 65, or PyYAML's own parser at 1,100 in
    6.0.4 and later), `config check` says so in one line naming the file, and exits 2."""
    from telemetry.cli import main

    f = tmp_path / "deep.yaml"
    f.write_text("sink: " + "[" * depth + "]" * depth + "\n")
    assert main(["config", "check", str(f)]) == 2
    out = capsys.readouterr()
    err = out.err.strip().splitlines()
    assert len(err) == 1 and str(f) in err[0] and "nest" in err[0].lower(), err
    assert "Traceback" not in out.err + out.out


def test_an_environment_override_that_is_not_yaml_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"environment RAILSCOPE__SINK__BATCH_ROWS: .*YAML"):
        load_config(None, env={"RAILSCOPE__SINK__BATCH_ROWS": "[1, 2"})


def test_a_password_with_a_lone_surrogate_is_hidden_not_a_crash() -> None:
    """A JSON document (or a YAML one's parsed form) may carry a lone surrogate in a password
    ("\\ud800"): loading either accepts it or says one line, and no log line shows it (the
    fuzzer found the Basic-credential redaction encoding it as strict UTF-8: a traceback)."""
    from telemetry.config import config_from_document, redact

    doc = {
        "sources": {
            "switch": {
                "switches": [
                    {"name": "spine-01", "address": "10.0.0.101:6379", "password": "p\ud800w!"}
                ]
            }
        }
    }
    try:
        config_from_document(doc, "config c.json", env={})
    except ConfigError as e:
        assert "\n" not in str(e)
    assert "p\ud800w!" not in str(redact(doc))
