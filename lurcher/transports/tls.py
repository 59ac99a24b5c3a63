"""TLS material for the front ends: certificate files, self-signed generation, SSL contexts.

A ``[<transport>.tls]`` section (``[quic.certificate]`` for QUIC) names ``cert_file`` and
``key_file``; relative paths resolve against ``system.path``. With ``self_signed = true`` and
both files missing, a certificate for ``localhost`` / 127.0.0.1 / ::1 (and its key) is
generated with ``cryptography`` and written there, so later starts reuse it. Invariants: the
key file is written with mode 0600 before the certificate; an existing file is never
overwritten (only one of the two present stops the start with one line). Every context is
TLS 1.2 or later. ``mutual_contexts`` serves ``[cluster.tls]``: both ends of a node link
present their certificate and require the peer's to chain to ``ca_file`` (no self-signing
there: the operator provides every file).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

if TYPE_CHECKING:
    from lurcher.cluster.config import ClusterTls
    from lurcher.runtime.settings import Certificate, Tls

SELF_SIGNED_VALIDITY_DAYS = 3650
DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1")


class TlsConfigError(ValueError):
    """Certificate files missing (and self-signing off) or unreadable."""


@dataclass(frozen=True)
class CertPaths:
    cert_file: Path
    key_file: Path


def _san(hosts: tuple[str, ...]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def _validity(now: datetime.datetime, days: int) -> tuple[datetime.datetime, datetime.datetime]:
    return now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: Any) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def make_ca(common_name: str = "lurcher test CA",
            days: int = SELF_SIGNED_VALIDITY_DAYS) -> tuple[x509.Certificate, Any]:
    """A CA certificate and its key (for tests and private deployments)."""
    key = new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    start, end = _validity(datetime.datetime.now(datetime.timezone.utc), days)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                         False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    return cert, key


def make_server_cert(hosts: tuple[str, ...] = DEFAULT_HOSTS, issuer: tuple[Any, Any] | None = None,
                     days: int = SELF_SIGNED_VALIDITY_DAYS,
                     client_auth: bool = False) -> tuple[x509.Certificate, Any]:
    """A server certificate for ``hosts``, signed by ``issuer`` (cert, key) or self-signed;
    ``client_auth``: also usable as a client certificate (a cluster node's, which both
    accepts and dials links)."""
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] + ([ExtendedKeyUsageOID.CLIENT_AUTH]
                                                  if client_auth else [])
    key = new_key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])])
    issuer_cert, issuer_key = issuer if issuer else (None, key)
    issuer_name = issuer_cert.subject if issuer_cert is not None else subject
    start, end = _validity(datetime.datetime.now(datetime.timezone.utc), days)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer_name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(end)
               .add_extension(_san(hosts), critical=False)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
    if issuer_cert is not None:
        ski = issuer_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski.value),
            critical=False)
    return builder.sign(issuer_key, hashes.SHA256()), key


def write_pair(paths: CertPaths, cert: x509.Certificate, key: Any) -> None:
    """Write key (0600) then certificate, each atomically."""
    for path, data, mode in ((paths.key_file, key_pem(key), 0o600),
                             (paths.cert_file, cert_pem(cert), 0o644)):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)


def resolve_path(name: str, data_path: Path) -> Path:
    """A configured file name; a relative one is under ``data_path``."""
    path = Path(name)
    return path if path.is_absolute() else data_path / path


def resolve_paths(section: Tls | Certificate | ClusterTls, data_path: Path) -> CertPaths:
    """``cert_file``/``key_file`` of a config section, relative ones under ``data_path``."""
    return CertPaths(resolve_path(section.cert_file, data_path),
                     resolve_path(section.key_file, data_path))


def ensure_certificate(section: Tls | Certificate, data_path: Path) -> CertPaths:
    """The certificate pair of ``section``, generated when missing and self-signing is on.

    Raises TlsConfigError when a file is missing and ``self_signed`` is false, or when only
    one of the two exists (generating would overwrite it: an operator's certificate with its
    key misnamed, say).
    """
    paths = resolve_paths(section, data_path)
    present = [path for path in (paths.cert_file, paths.key_file) if path.exists()]
    if len(present) == 2:
        return paths
    if not section.self_signed:
        raise TlsConfigError(f"TLS certificate {paths.cert_file} or key {paths.key_file} "
                             f"is missing and self_signed = false")
    if present:
        raise TlsConfigError(_half_pair(paths, present[0]))
    cert, key = make_server_cert()
    write_pair(paths, cert, key)
    return paths


def _half_pair(paths: CertPaths, present: Path) -> str:
    """The refusal of a pair with one file: self-signing would have replaced that file."""
    missing = paths.key_file if present == paths.cert_file else paths.cert_file
    return (f"TLS {'key' if missing == paths.key_file else 'certificate'} {missing} is "
            f"missing but {present} exists; not replacing it with a self-signed pair (name "
            f"both files of the pair, or remove {present} to have one generated)")


def _context(protocol: int, paths: CertPaths) -> ssl.SSLContext:
    """A TLS 1.2+ context of ``protocol`` presenting ``paths``. Raises TlsConfigError."""
    ctx = ssl.SSLContext(protocol)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(str(paths.cert_file), str(paths.key_file))
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"cannot load {paths.cert_file} / {paths.key_file}: {exc}") from exc
    return ctx


def server_context(section: Tls, data_path: Path) -> ssl.SSLContext:
    """A server SSLContext (TLS 1.2+) for ``section``. Raises TlsConfigError."""
    return presenting(ensure_certificate(section, data_path))


def presenting(paths: CertPaths) -> ssl.SSLContext:
    """A server SSLContext (TLS 1.2+) presenting ``paths``. Raises TlsConfigError."""
    return _context(ssl.PROTOCOL_TLS_SERVER, paths)


def mutual_contexts(section: ClusterTls,
                    data_path: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """The (accepting, dialing) contexts of a mutual-TLS link: each presents ``cert_file``
    and requires the peer's certificate to chain to ``ca_file``. Names are not checked: any
    certificate of that CA is a member (the link's secret handshake then proves which node).
    Raises TlsConfigError (a file missing or unreadable)."""
    paths, ca_file = resolve_paths(section, data_path), resolve_path(section.ca_file, data_path)
    contexts = []
    for protocol in (ssl.PROTOCOL_TLS_SERVER, ssl.PROTOCOL_TLS_CLIENT):
        ctx = _context(protocol, paths)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_REQUIRED
        try:
            ctx.load_verify_locations(cafile=str(ca_file))
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError(f"cannot load CA {ca_file}: {exc}") from exc
        contexts.append(ctx)
    return contexts[0], contexts[1]
