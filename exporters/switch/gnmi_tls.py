"""The gRPC channel to one switch's gNMI server: plaintext, TLS verified against a CA (with an
optional client certificate), or TLS without verification only when `skip_verify` is set."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from exporters.switch.config import GnmiConfig
from telemetry.errors import UserError


def split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    try:
        if not sep or not host:
            raise ValueError
        return host.strip("[]"), int(port)
    except ValueError:
        raise UserError(f"gnmi address {address!r}: expected HOST:PORT") from None


def _read(path: str | None, what: str) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise UserError(f"gnmi tls {what} {path}: {e.strerror}") from None


def _cert_name(pem: bytes) -> str | None:
    """The first DNS name (else the CN) of a PEM certificate."""
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(pem)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = san.get_values_for_type(x509.DNSName)
        if names:
            return str(names[0])
    except x509.ExtensionNotFound:
        pass
    cn = cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    return str(cn[0].value) if cn else None


@contextlib.asynccontextmanager
async def channel(cfg: GnmiConfig, timeout: float) -> AsyncIterator[Any]:
    import grpc

    host, port = split_address(cfg.address)
    target = f"{host}:{port}"
    opts: list[tuple[str, Any]] = [("grpc.max_receive_message_length", 64 << 20)]
    tls = cfg.tls
    if tls is None:
        ch = grpc.aio.insecure_channel(target, options=opts)
    else:
        ca = _read(tls.ca, "ca")
        if tls.skip_verify:
            # grpc has no "do not verify": trust exactly what this server presents, this once
            pem = await asyncio.get_running_loop().run_in_executor(
                None, lambda: ssl.get_server_certificate((host, port), timeout=timeout)
            )
            ca = pem.encode()
            name = _cert_name(ca)
            if name:
                opts.append(("grpc.ssl_target_name_override", name))
        elif tls.server_name:
            opts.append(("grpc.ssl_target_name_override", tls.server_name))
        creds = grpc.ssl_channel_credentials(
            root_certificates=ca,
            private_key=_read(tls.key, "key"),
            certificate_chain=_read(tls.cert, "cert"),
        )
        ch = grpc.aio.secure_channel(target, creds, options=opts)
    try:
        yield ch
    finally:
        await ch.close()


__all__ = ["channel", "split_address"]
