"""EtcdLock against a private etcd that the tests restart, edit by hand, fill up or serve over TLS.

The shared member is never stopped or reconfigured: every test here starts its own
single-member `etcd` on free ports, with its data in the test's temporary directory.
Its outages are the shared `OutageContract`'s.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import ssl
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from firefly_scheduling import LockBackendError
from firefly_scheduling.testing import OutageContract
from firefly_scheduling.testing.local_server import LocalServer, free_local_port
from firefly_scheduling_etcd import AsyncEtcdLock, EtcdLock
from firefly_scheduling_etcd.protocol import lease_id, lock_key

NAME = "etcd-faults:job"
#: Longest a fresh member may take to elect itself leader.
READY_SECONDS = 20.0


def etcd_member(
    data_dir: Path, *options: str, scheme: str = "http"
) -> Callable[[int], Sequence[str]]:
    """The argv of a single-member etcd on `port`; the same data and peer port on restart."""
    peer = f"http://127.0.0.1:{free_local_port()}"

    def command(port: int) -> list[str]:
        client = f"{scheme}://127.0.0.1:{port}"
        return [
            "etcd",
            "--name=faults",
            f"--data-dir={data_dir}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=faults={peer}",
            *options,
        ]

    return command


def wait_ready(server: LocalServer, client: httpx.Client | None = None) -> None:
    """Wait (bounded) until the member has a leader: its port opens before that."""
    deadline = time.monotonic() + READY_SECONDS
    base = url_of(server).replace("etcd", "http", 1)
    with client or httpx.Client(base_url=base, timeout=1.0) as client:
        while True:
            try:
                if client.get("/health").json().get("health") == "true":
                    return
            except (httpx.HTTPError, ValueError):
                pass
            assert time.monotonic() < deadline, "the private etcd elected no leader"
            time.sleep(0.1)


def url_of(server: LocalServer) -> str:
    return f"etcd://127.0.0.1:{server.port}"


@pytest.fixture
def private_member(tmp_path: Path) -> Iterator[LocalServer]:
    with LocalServer(etcd_member(tmp_path / "data")) as server:
        wait_ready(server)
        yield server


@pytest.fixture
def admin(private_member: LocalServer) -> Iterator[httpx.Client]:
    base = url_of(private_member).replace("etcd", "http", 1)
    with httpx.Client(base_url=base, timeout=5.0) as client:
        yield client


class ReadyMember:
    """A private member whose `start` returns once it has a leader, not once its port opens."""

    def __init__(self, server: LocalServer) -> None:
        self.server = server

    def stop(self) -> None:
        self.server.stop()

    def start(self) -> None:
        self.server.start()
        wait_ready(self.server)


class TestEtcdOutage(OutageContract):
    pytestmark = pytest.mark.slow
    restart_keeps_locks = True  # leases and keys are on disk: a restart frees nothing

    @pytest.fixture
    def restartable_server(self, private_member: LocalServer) -> ReadyMember:
        return ReadyMember(private_member)

    @pytest.fixture
    def lock_factory(self, private_member: LocalServer) -> partial[EtcdLock]:
        # One connection per lock, so the same one is reused after the restart.
        return partial(EtcdLock, f"{url_of(private_member)}?pool_size=1")


@pytest.mark.slow
def test_a_connection_closed_by_a_restart_is_replaced_by_the_next_request(
    private_member: LocalServer,
) -> None:
    url = f"{url_of(private_member)}?pool_size=1"  # one connection: the same one is reused
    lock = EtcdLock(url)
    assert lock.try_acquire(NAME, 60)  # the connection is open, idle, kept alive
    private_member.stop()
    private_member.start()
    wait_ready(private_member)
    # The member closed that connection when it stopped. The renewal must connect
    # afresh, not fail on the dead socket (a write to it may even "succeed").
    assert lock.renew(NAME, 60) is True
    lock.release(NAME)
    assert stored_owner(private_member, NAME) is None
    lock.close()


@pytest.mark.slow
def test_the_asyncio_lock_also_survives_a_restart_between_requests(
    private_member: LocalServer,
) -> None:
    url = f"{url_of(private_member)}?pool_size=1"

    async def scenario() -> None:
        lock = AsyncEtcdLock(url)
        assert await lock.try_acquire(NAME, 60)
        private_member.stop()
        private_member.start()
        await asyncio.to_thread(wait_ready, private_member)
        assert await lock.renew(NAME, 60) is True
        await lock.release(NAME)
        await lock.aclose()

    asyncio.run(scenario())
    assert stored_owner(private_member, NAME) is None


def stored_owner(server: LocalServer, name: str) -> str | None:
    """The owner token the member stores for `name`, read by a client of its own."""
    key = base64.b64encode(lock_key(name)).decode()
    base = url_of(server).replace("etcd", "http", 1)
    with httpx.Client(base_url=base, timeout=5.0, trust_env=False) as client:
        kvs = client.post("/v3/kv/range", json={"key": key}).json().get("kvs", [])
    return base64.b64decode(kvs[0]["value"]).decode() if kvs else None


def test_a_key_deleted_by_hand_is_lost_at_the_next_renewal(
    private_member: LocalServer, admin: httpx.Client
) -> None:
    holder, other, third = (EtcdLock(url_of(private_member)) for _ in range(3))
    assert holder.try_acquire(NAME, 60)
    key = base64.b64encode(lock_key(NAME)).decode()
    deleted = admin.post("/v3/kv/deleterange", json={"key": key}).json()
    assert deleted["deleted"] == "1"
    # The holder's lease is still alive: only the check of the key tells it apart.
    assert holder.renew(NAME, 60) is False
    assert holder.is_lost(NAME)
    assert other.try_acquire(NAME, 60)
    holder.release(NAME)  # revokes the holder's own lease: the new holder keeps its key
    assert third.try_acquire(NAME, 60) is False
    other.release(NAME)
    assert third.try_acquire(NAME, 60)
    third.release(NAME)


def test_fencing_tokens_are_the_keys_create_revision(
    private_member: LocalServer, admin: httpx.Client
) -> None:
    lock = EtcdLock(url_of(private_member))
    token = lock.try_acquire_fenced(NAME, 60)
    key = base64.b64encode(lock_key(NAME)).decode()
    [stored] = admin.post("/v3/kv/range", json={"key": key}).json()["kvs"]
    assert token == int(stored["create_revision"])
    # The value is the owner token, and the key's lease is the one derived from it.
    owner = base64.b64decode(stored["value"]).decode()
    assert int(stored["lease"]) == lease_id(owner)
    lock.release(NAME)


def test_a_full_member_refuses_new_locks_naming_the_alarm(tmp_path: Path) -> None:
    # A 1 MiB quota is exceeded by a few hundred kilobytes of values.
    with LocalServer(etcd_member(tmp_path / "data", "--quota-backend-bytes=1048576")) as server:
        wait_ready(server)
        base = url_of(server).replace("etcd", "http", 1)
        with httpx.Client(base_url=base, timeout=5.0) as admin:
            filler = base64.b64encode(b"x" * 100_000).decode()
            for index in range(40):
                answer = admin.post(
                    "/v3/kv/put",
                    json={
                        "key": base64.b64encode(f"filler/{index}".encode()).decode(),
                        "value": filler,
                    },
                )
                if answer.status_code != 200:
                    break
            assert "database space exceeded" in answer.text
        lock = EtcdLock(url_of(server))
        with pytest.raises(LockBackendError, match="NOSPACE alarm"):
            lock.try_acquire(NAME, 60)
        lock.close()


# -- TLS -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pki:
    """A throwaway CA, a server certificate for 127.0.0.1 and a client certificate."""

    ca: Path
    server: tuple[Path, Path]
    client: tuple[Path, Path]


def _issue(
    directory: Path, name: str, issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None
) -> tuple[Path, Path, x509.Name, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer_name, issuer_key = issuer or (subject, key)
    now = datetime.now(UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if issuer is not None:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    certificate = builder.sign(issuer_key, hashes.SHA256())
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}-key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path, subject, key


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    ca_cert, _, ca_name, ca_key = _issue(tmp_path, "ca", None)
    server_cert, server_key, _, _ = _issue(tmp_path, "server", (ca_name, ca_key))
    client_cert, client_key, _, _ = _issue(tmp_path, "client", (ca_name, ca_key))
    return Pki(ca_cert, (server_cert, server_key), (client_cert, client_key))


@pytest.fixture
def tls_member(tmp_path: Path, pki: Pki) -> Iterator[LocalServer]:
    """A member that serves clients over TLS only and demands a client certificate."""
    command = etcd_member(
        tmp_path / "data",
        f"--cert-file={pki.server[0]}",
        f"--key-file={pki.server[1]}",
        "--client-cert-auth",
        f"--trusted-ca-file={pki.ca}",
        scheme="https",
    )
    with LocalServer(command) as server:
        context = ssl.create_default_context(cafile=str(pki.ca))
        context.load_cert_chain(*pki.client)
        base = f"https://127.0.0.1:{server.port}"
        wait_ready(server, httpx.Client(base_url=base, timeout=1.0, verify=context))
        yield server


def test_an_etcds_url_with_a_client_certificate_locks_over_tls(
    tls_member: LocalServer, pki: Pki
) -> None:
    url = (
        f"etcds://127.0.0.1:{tls_member.port}?cacert={pki.ca}"
        f"&cert={pki.client[0]}&key={pki.client[1]}"
    )
    holder, other = EtcdLock(url), EtcdLock(url)
    token = holder.try_acquire_fenced(NAME, 60)
    assert token is not None
    assert other.try_acquire(NAME, 60) is False
    assert holder.renew(NAME, 60)
    holder.release(NAME)
    assert (other.try_acquire_fenced(NAME, 60) or 0) > token
    other.release(NAME)


@pytest.mark.parametrize(
    ("missing", "hint"),
    [
        ("the client certificate", "the member demands a client certificate"),
        ("the CA", "not signed by a CA this client trusts"),
    ],
)
def test_tls_without_what_the_member_demands_fails_as_a_backend_error(
    tls_member: LocalServer, pki: Pki, missing: str, hint: str
) -> None:
    url = f"etcds://127.0.0.1:{tls_member.port}?cacert={pki.ca}"
    if missing == "the CA":  # the system's CAs do not know this throwaway CA
        url = f"etcds://127.0.0.1:{tls_member.port}?cert={pki.client[0]}&key={pki.client[1]}"
    lock = EtcdLock(url)
    with pytest.raises(LockBackendError, match=f"etcd lock backend etcds://.*{hint}"):
        lock.try_acquire(NAME, 60)
    lock.close()
