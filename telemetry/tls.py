"""How every railscope HTTP server gets its TLS (/metrics, the ingest gateway): a certificate file
and a key file, both or neither, loaded when the config is validated so a wrong path or a key
that does not match is one config error, not a failure at start. Never opens a socket.
"""

from __future__ import annotations

import ssl


def server_context(cert_file: str | None, key_file: str | None) -> ssl.SSLContext | None:
    """The server TLS context of `cert_file` and `key_file` (PEM); None: plain HTTP. ValueError
    (one line, naming the files) where only one is given or they cannot be loaded."""
    if not (cert_file or key_file):
        return None
    if not (cert_file and key_file):
        raise ValueError("tls_cert_file and tls_key_file go together")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        ctx.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as e:
        raise ValueError(
            f"cannot load {cert_file} / {key_file}: {getattr(e, 'strerror', None) or e}"
        ) from None
    return ctx
