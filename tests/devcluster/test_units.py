"""Unit tests of the dev cluster's pieces that need no running cluster: go.mod rendering, PKI,
process tracking and port choice."""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
import sys
import time
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from mcpfleet.devcluster import build, pki
from mcpfleet.devcluster.cluster import PORT_NAMES, DevCluster
from mcpfleet.devcluster.processes import ProcessDir, ProcessRecord, is_running, stop
from tests.conftest import run_async

KUBE_GOMOD_SAMPLE = """\
// This is a generated file. Do not edit directly.

module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
\tgithub.com/x/y v1.0.0
\tk8s.io/api v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/streaming => ./staging/src/k8s.io/streaming // comment
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tgithub.com/other/mod => github.com/fork/mod v1.2.3
)
"""


def test_parse_kube_gomod_reads_staging_modules_go_and_godebug() -> None:
    info = build.parse_kube_gomod(KUBE_GOMOD_SAMPLE)
    assert info.go_line == "go 1.26.0"
    assert info.godebug_lines == ("godebug default=go1.26",)
    assert info.staging_modules == ("k8s.io/api", "k8s.io/client-go", "k8s.io/streaming")


def test_parse_kube_gomod_rejects_a_file_without_staging() -> None:
    with pytest.raises(build.BuildError, match="staging"):
        build.parse_kube_gomod("module x\n\ngo 1.26.0\n")


def test_render_kube_gomod_replaces_every_staging_module_with_its_published_version() -> None:
    info = build.parse_kube_gomod(KUBE_GOMOD_SAMPLE)
    text = build.render_kube_gomod(info, "v1.36.3", "v0.8.0")
    lines = text.splitlines()
    assert lines[0] == f"module {build.WRAPPER_MODULE}"
    assert "go 1.26.0" in lines and "godebug default=go1.26" in lines
    assert "require k8s.io/kubernetes v1.36.3" in lines and "require sigs.k8s.io/kwok v0.8.0" in lines
    for mod in info.staging_modules:
        assert f"replace {mod} => {mod} v0.36.3" in lines
    for pkg in build.KUBE_PACKAGES:
        assert f"tool {pkg}" in lines
    assert text.endswith("\n") and not text.endswith("\n\n")


def test_render_matches_the_cached_wrapper_when_present() -> None:
    """The cache's go.mod.in is what a fresh machine renders: same input -> build cache reused."""
    layout = build.BuildLayout(build.default_cache_root())
    marker = layout.kube_src / "go.mod.in"
    kube_mod = layout.gomodcache / "cache/download/k8s.io/kubernetes/@v" / f"{layout.kube_version}.mod"
    if not (marker.is_file() and kube_mod.is_file()):
        pytest.fail(f"binaries not built yet ({marker}); run `mcpfleet dev-cluster build`")
    info = build.parse_kube_gomod(kube_mod.read_text())
    assert build.render_kube_gomod(info, layout.kube_version, layout.kwok_version) == marker.read_text()


def test_ldflags_stamp_the_version_and_reject_a_bad_one() -> None:
    flags = build.kube_ldflags("v1.36.3")
    assert "version.gitVersion=v1.36.3" in flags and "gitMajor=1" in flags and "gitMinor=36" in flags
    assert build.staging_version("v1.36.3") == "v0.36.3"
    with pytest.raises(build.BuildError, match="kube_version"):
        build.kube_ldflags("1.36")


def test_cache_root_honours_overrides(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MCPFLEET_CACHE_DIR", str(tmp_path / "c"))
    assert build.default_cache_root() == tmp_path / "c"
    monkeypatch.delenv("MCPFLEET_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert build.default_cache_root() == tmp_path / "xdg" / "mcpfleet"
    env = build.go_env(build.BuildLayout(tmp_path / "root"), base={"PATH": "/usr/bin"})
    assert env["GOMODCACHE"] == str(tmp_path / "root/go/mod") and env["GOTOOLCHAIN"] == "local"
    assert env["CGO_ENABLED"] == "0" and env["PATH"] == "/usr/bin"


def test_pki_chain_sans_identities_and_permissions(tmp_path: Path) -> None:
    p = pki.ensure_pki(tmp_path / "pki")
    ca = x509.load_pem_x509_certificate(p.ca_cert.read_bytes())
    serving = x509.load_pem_x509_certificate(p.serving_cert.read_bytes())
    serving.verify_directly_issued_by(ca)
    san = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in san.get_values_for_type(x509.IPAddress)
    assert "kubernetes.default.svc" in san.get_values_for_type(x509.DNSName)
    assert serving.not_valid_after_utc > datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=365)

    admin = x509.load_pem_x509_certificate(p.client_cert("admin").read_bytes())
    admin.verify_directly_issued_by(ca)
    assert admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:masters"
    for key in (p.ca_key, p.serving_key, p.sa_key, p.client_key("admin")):
        assert key.stat().st_mode & 0o777 == 0o600
    assert oct((tmp_path / "pki").stat().st_mode & 0o777) == "0o700"


def test_pki_is_created_once_and_reused(tmp_path: Path) -> None:
    p = pki.ensure_pki(tmp_path)
    first = {f.name: f.read_bytes() for f in tmp_path.iterdir()}
    pki.ensure_pki(tmp_path)
    assert {f.name: f.read_bytes() for f in tmp_path.iterdir()} == first
    # A lost client cert is regenerated, signed by the same CA.
    p.client_cert("kwok").unlink()
    pki.ensure_pki(tmp_path)
    ca = x509.load_pem_x509_certificate(p.ca_cert.read_bytes())
    x509.load_pem_x509_certificate(p.client_cert("kwok").read_bytes()).verify_directly_issued_by(ca)
    assert p.ca_cert.read_bytes() == first["ca.crt"]


def test_kubeconfig_embeds_credentials(tmp_path: Path) -> None:
    p = pki.ensure_pki(tmp_path)
    doc = yaml.safe_load(pki.render_kubeconfig(p, "https://127.0.0.1:6443", "admin"))
    assert doc["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    user = doc["users"][0]["user"]
    assert user["client-certificate-data"] and user["client-key-data"]
    assert doc["current-context"] == doc["contexts"][0]["name"]
    key = pki._load_key(p.sa_key)
    assert isinstance(key, ec.EllipticCurvePrivateKey)


def test_processes_start_track_and_stop(tmp_path: Path) -> None:
    procs = ProcessDir(tmp_path)
    rec = procs.start(
        "sleeper", [sys.executable, "-c", "import time; print('hello', flush=True); time.sleep(60)"]
    )
    assert is_running(rec)
    assert procs.read("sleeper") == rec
    deadline = time.monotonic() + 10
    while "hello" not in procs.log_tail("sleeper") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run_async(stop(rec, grace=5)) is True
    assert not is_running(rec)
    assert run_async(stop(rec)) is False
    assert "hello" in procs.log_tail("sleeper")


def test_a_recycled_pid_is_never_signalled(tmp_path: Path) -> None:
    procs = ProcessDir(tmp_path)
    rec = procs.start("victim", [sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        # Same pid, different start time: as if the pid had been reused by another program.
        impostor = ProcessRecord(rec.name, rec.pid, rec.start_time + 1, rec.argv, rec.log)
        assert not is_running(impostor)
        assert run_async(stop(impostor, grace=1)) is False
        assert is_running(rec)
    finally:
        run_async(stop(rec, grace=5))


def test_stop_escalates_to_sigkill(tmp_path: Path) -> None:
    procs = ProcessDir(tmp_path)
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        " print('ready', flush=True); time.sleep(60)"
    )
    rec = procs.start("stubborn", [sys.executable, "-c", code])
    for _ in range(100):
        if "ready" in procs.log_tail("stubborn"):
            break
        time.sleep(0.05)
    assert run_async(stop(rec, grace=0.5)) is True
    assert not is_running(rec)


def test_port_choice_keeps_free_ports_and_replaces_busy_ones(tmp_path: Path) -> None:
    cluster = DevCluster(tmp_path)
    first = cluster._choose_ports({})
    assert set(first) == set(PORT_NAMES) and len(set(first.values())) == len(PORT_NAMES)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", first["apiserver"]))
        busy.listen()
        second = cluster._choose_ports(first)
    assert second["apiserver"] != first["apiserver"]
    assert {k: v for k, v in second.items() if k != "apiserver"} == {
        k: v for k, v in first.items() if k != "apiserver"
    }
    assert len(set(second.values())) == len(PORT_NAMES)


def test_pid_file_is_json_with_argv(tmp_path: Path) -> None:
    procs = ProcessDir(tmp_path)
    rec = procs.start("echo", ["/bin/echo", "hi"])
    text = procs.pid_file("echo").read_text()
    assert f'"pid": {rec.pid}' in text and '"/bin/echo"' in text


def test_test_sessions_share_the_cluster_and_the_last_one_stops_it(tmp_path: Path) -> None:
    """release_for_tests: no stop while another live session is registered, nor for a cluster a
    developer started; the last test user of a test-started cluster purges it."""
    from mcpfleet.devcluster.cluster import STATE_FILE, TEST_OWNER_FILE, release_for_tests

    cluster = DevCluster(tmp_path / "state")
    users = cluster.state_dir / "users"
    users.mkdir(parents=True)
    (cluster.state_dir / STATE_FILE).write_text("{}")
    (users / str(os.getpid())).write_text("")
    (users / str(os.getppid())).write_text("")  # another live session
    (users / "999999999").write_text("")  # a crashed session: pruned
    (cluster.state_dir / TEST_OWNER_FILE).write_text("1")

    assert run_async(release_for_tests(cluster, keep=False)) is False
    assert sorted(p.name for p in users.iterdir()) == [str(os.getppid())]

    (users / str(os.getppid())).unlink()
    assert run_async(release_for_tests(cluster, keep=True)) is False
    assert (cluster.state_dir / STATE_FILE).exists()

    (cluster.state_dir / TEST_OWNER_FILE).unlink()
    assert run_async(release_for_tests(cluster, keep=False)) is False  # a developer's cluster
    (cluster.state_dir / TEST_OWNER_FILE).write_text("1")
    assert run_async(release_for_tests(cluster, keep=False)) is True
    assert [p.name for p in cluster.state_dir.iterdir()] == [".lock"]
