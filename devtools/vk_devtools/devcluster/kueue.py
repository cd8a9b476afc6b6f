"""Kueue in the development cluster: built from our pinned module, run as a process against the plane.

`KUEUE` is the GoBuild (`gomod-kueue/` pins `sigs.k8s.io/kueue` v0.17.0; `dev build` builds it). `start`
installs what Kueue needs on the plane and runs it:

- its CRDs, from the module's own `config/components/crd/bases`. Four of them convert v1beta1 <->
  v1beta2 through Kueue's conversion webhook, so that webhook is wired like the others;
- its ClusterRole (`config/components/rbac/role.yaml`), bound to a user of its own whose client
  certificate the plane's CA signs: Kueue runs with its own rights, not as admin;
- its admission webhooks. The apiserver must reach a process on this host, and must trust it: each
  webhook (and each conversion) is called by URL, https://127.0.0.1:<port>/<path>, and Kueue serves a
  certificate for 127.0.0.1 from a CA of its own whose certificate is the webhooks' caBundle. Kueue's
  internal cert manager is off: it mints a certificate for a Service name, which only resolves
  through a Service and EndpointSlice (and `--enable-aggregator-routing`); a URL needs neither.
- Only the webhooks of the integration we run (batch/job) and of Kueue's own objects are installed,
  and the namespaced ones (Jobs, Workloads, LocalQueues) carry a namespaceSelector on `MANAGED_LABEL`:
  a Kueue that is stopped or restarting must never fail another namespace's Job creation (the
  webhooks fail closed). `managedJobsNamespaceSelector` says the same to Kueue's Job controller.

Kueue's leader election is off (one process), and so are its metrics endpoint and its visibility API
server (an aggregated API we do not register). With its internal cert manager off, Kueue v0.17 insists
on reading a metrics certificate at the fixed path `/etc/kueue/metrics/certs` (where its Deployment
mounts a Secret) even when metrics are off: `start` puts one there when none is (root needed, as on CI
and the development machine), never replacing one that exists.
"""

from __future__ import annotations

import base64
import dataclasses
import ipaddress
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from vk_devtools.devcluster import processes
from vk_devtools.devcluster.building import BinaryCache, Component, GoBuild, VersionStamp, module_source
from vk_devtools.devcluster.cluster import ClusterState
from vk_devtools.devcluster.kubeconfigs import write_kubeconfig
from vk_devtools.devcluster.pki import CertificateAuthority, ClientIdentity, KeyPair
from vk_devtools.devcluster.ports import LOOPBACK, PortPicker
from vk_devtools.devcluster.traffic import kubectl_apply

MODULE = "sigs.k8s.io/kueue"
GOMOD_DIR = Path(__file__).with_name("gomod-kueue")
KUEUE = GoBuild(
    name="Kueue",
    cache_folder="kueue",
    gomod_dir=GOMOD_DIR,
    components=(
        Component(
            "kueue",
            f"{MODULE}/cmd/kueue",
            VersionStamp(MODULE, lambda version: {f"{MODULE}/pkg/version.GitVersion": version}),
        ),
    ),
    folder_modules=(("kueue", MODULE),),
    cold_build_note="A cold build of Kueue takes about 12 minutes on 2 shared cores (6 minutes of CPU).",
)

COMPONENT = "kueue"
NAMESPACE = "kueue-system"
MANAGED_LABEL = "kueue.vk-provider.dev/managed"
"""Namespaces labelled `MANAGED_LABEL=true` are the ones Kueue's Job webhooks and controller act in."""
USER = "vk-provider:kueue"
CLUSTER_ROLE = "vk-provider-kueue-manager"
WEBHOOK_CONFIGURATIONS = {
    "MutatingWebhookConfiguration": "vk-provider-kueue-mutating",
    "ValidatingWebhookConfiguration": "vk-provider-kueue-validating",
}
KEPT_GROUPS = {"batch", "kueue.x-k8s.io"}
"""Webhooks kept: Kueue's own objects and batch Jobs (the only integration enabled)."""
CONVERTED = {"localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters"}
"""The CRDs upstream's kustomization patches to the conversion webhook (config/components/crd)."""
CLUSTER_SCOPED = {"clusterqueues", "cohorts", "resourceflavors", "topologies", "admissionchecks"}
READY_TIMEOUT_SECONDS = 120.0
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
WEBHOOK_PORT = "kueue-webhook"
HEALTH_PORT = "kueue-health"


@dataclasses.dataclass(frozen=True)
class KueueFiles:
    """What `start` writes in the plane's folder for Kueue."""

    folder: Path

    @property
    def config(self) -> Path:
        return self.folder / "config.yaml"

    @property
    def kubeconfig(self) -> Path:
        return self.folder / "kubeconfig"

    @property
    def certs(self) -> Path:
        return self.folder / "certs"

    @property
    def manifest(self) -> Path:
        return self.folder / "install.yaml"

    @property
    def crds(self) -> Path:
        return self.folder / "crds.yaml"

    @property
    def log(self) -> Path:
        return self.folder.parent / "logs" / "kueue.log"


def module_dir(cache: BinaryCache) -> Path:
    """The pinned Kueue module's source in the Go module cache (its manifests live there)."""
    return module_source(MODULE, cache.pins.version(MODULE), cwd=KUEUE.gomod_dir)


def _documents(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def _ca_bundle(ca: CertificateAuthority) -> str:
    return base64.b64encode(ca.paths.cert.read_bytes()).decode()


def crds(source: Path, *, url: str, ca_bundle: str) -> list[dict[str, Any]]:
    """Kueue's CRDs; those upstream converts through its webhook (`CONVERTED`) call it at `url`. The
    others keep the default (no conversion): Kueue cannot convert them, and says so if asked."""
    documents = []
    for path in sorted((source / "config" / "components" / "crd" / "bases").glob("*.yaml")):
        for crd in _documents(path):
            if crd["spec"].get("names", {}).get("plural") in CONVERTED:
                crd["spec"]["conversion"] = {
                    "strategy": "Webhook",
                    "webhook": {
                        "clientConfig": {"url": f"{url}/convert", "caBundle": ca_bundle},
                        "conversionReviewVersions": ["v1"],
                    },
                }
            documents.append(crd)
    return documents


def _kept(webhook: Mapping[str, Any]) -> bool:
    groups = {group for rule in webhook.get("rules") or () for group in rule.get("apiGroups") or ()}
    return bool(groups) and groups <= KEPT_GROUPS


def _namespaced(webhook: Mapping[str, Any]) -> bool:
    resources = {r.split("/")[0] for rule in webhook.get("rules") or () for r in rule.get("resources") or ()}
    return not resources <= CLUSTER_SCOPED


def webhook_configurations(source: Path, *, url: str, ca_bundle: str) -> list[dict[str, Any]]:
    documents = []
    for configuration in _documents(source / "config" / "components" / "webhook" / "manifests.yaml"):
        kind = configuration["kind"]
        webhooks = []
        for webhook in configuration.get("webhooks") or ():
            if not _kept(webhook):
                continue
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": f"{url}{path}", "caBundle": ca_bundle}
            if _namespaced(webhook):
                webhook["namespaceSelector"] = {"matchLabels": {MANAGED_LABEL: "true"}}
            webhooks.append(webhook)
        configuration["metadata"] = {"name": WEBHOOK_CONFIGURATIONS[kind]}
        configuration["webhooks"] = webhooks
        documents.append(configuration)
    return documents


def rbac(source: Path) -> list[dict[str, Any]]:
    """Upstream's manager ClusterRole and its Secrets Role in Kueue's namespace, bound to our user."""
    folder = source / "config" / "components" / "rbac"
    [role] = _documents(folder / "role.yaml")
    role["metadata"] = {"name": CLUSTER_ROLE}
    [secrets] = _documents(folder / "manager_secrets_role.yaml")
    secrets["metadata"] = {"name": CLUSTER_ROLE, "namespace": NAMESPACE}
    subjects = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}]
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": CLUSTER_ROLE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CLUSTER_ROLE},
        "subjects": subjects,
    }
    secrets_binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": CLUSTER_ROLE, "namespace": NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": CLUSTER_ROLE},
        "subjects": subjects,
    }
    return [role, binding, secrets, secrets_binding]


def configuration(files: KueueFiles, *, webhook_port: int, health_port: int) -> dict[str, Any]:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"{LOOPBACK}:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": webhook_port, "host": LOOPBACK, "certDir": str(files.certs)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "managedJobsNamespaceSelector": {"matchLabels": {MANAGED_LABEL: "true"}},
        "integrations": {"frameworks": ["batch/job"]},
        "clientConnection": {"qps": 50, "burst": 100},
    }


def ensure_metrics_certificate(ca: CertificateAuthority, folder: Path = METRICS_CERT_DIR) -> None:
    """A certificate where Kueue looks for its metrics one (see the module's docstring)."""
    if (folder / "tls.crt").is_file() and (folder / "tls.key").is_file():
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        ca.issue_serving(folder, "tls", common_name="kueue-metrics", dns_names=("localhost",))
    except OSError as error:
        raise RuntimeError(
            f"Kueue v0.17 reads a metrics certificate from {folder} and it cannot be written there "
            f"({error}); create tls.crt and tls.key there (any serving certificate) and try again"
        ) from None


def _load_ca(pki: Path) -> CertificateAuthority:
    cert = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise RuntimeError(f"{pki / 'ca.key'} is not the plane's EC key")
    return CertificateAuthority(cert, key, KeyPair(pki / "ca.crt", pki / "ca.key"))


def _write_yaml(path: Path, documents: Iterable[Mapping[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump_all(list(documents), sort_keys=False))
    return path


@dataclasses.dataclass(frozen=True)
class Started:
    process: subprocess.Popen[bytes]
    record: processes.ProcessRecord
    webhook_url: str
    health_url: str
    ports: dict[str, int]
    """Recorded in the plane's state: `dev restart kueue` waits on HEALTH_PORT's /readyz."""


def install_and_start(
    *, directory: Path, bin_dir: Path, server: str, admin_kubeconfig: Path, cache: BinaryCache, out: TextIO
) -> Started:
    """Install Kueue's CRDs, RBAC and webhooks on the plane in `directory`, start Kueue, wait until it
    is ready. The plane's kubectl (in `bin_dir`) applies everything as admin."""
    binary = cache.binary("kueue")
    source = module_dir(cache)
    files = KueueFiles(directory / "kueue")
    files.certs.mkdir(parents=True, exist_ok=True)
    picker = PortPicker()
    webhook_port, health_port = picker.pick(), picker.pick()
    webhook_ca = CertificateAuthority.create(
        files.folder / "webhook-ca", common_name="vk-provider-kueue-webhook-ca"
    )
    webhook_ca.issue_serving(
        files.certs, "tls", common_name="kueue-webhook", dns_names=("localhost",),
        ip_addresses=(ipaddress.ip_address(LOOPBACK),),
    )  # fmt: skip
    ensure_metrics_certificate(webhook_ca)
    identity = ClientIdentity("kueue-client", USER)
    client = _load_ca(directory / "pki").issue_client(files.folder, identity)
    write_kubeconfig(
        files.kubeconfig, server=server, ca_cert=directory / "pki" / "ca.crt", client=client, user=USER
    )
    url = f"https://{LOOPBACK}:{webhook_port}"
    bundle = _ca_bundle(webhook_ca)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    definitions = crds(source, url=url, ca_bundle=bundle)
    _write_yaml(files.crds, definitions)
    _write_yaml(
        files.manifest, [namespace, *rbac(source), *webhook_configurations(source, url=url, ca_bundle=bundle)]
    )
    _write_yaml(files.config, [configuration(files, webhook_port=webhook_port, health_port=health_port)])
    # Server-side: the CRDs are larger than client-side apply's last-applied annotation allows.
    kubectl_apply(
        bin_dir, admin_kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", str(files.crds)
    )
    names = [f"crd/{crd['metadata']['name']}" for crd in definitions]
    kubectl_apply(bin_dir, admin_kubeconfig, "wait", "--for=condition=Established", *names, "--timeout=60s")
    kubectl_apply(
        bin_dir, admin_kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", str(files.manifest)
    )
    argv = [
        str(binary),
        f"--config={files.config}",
        f"--kubeconfig={files.kubeconfig}",
        "--feature-gates=VisibilityOnDemand=false",
        "--zap-log-level=2",
    ]
    process, record = processes.start(COMPONENT, argv, log_path=files.log)
    health = f"http://{LOOPBACK}:{health_port}/readyz"
    processes.wait_until(
        COMPONENT,
        lambda: http_ok(health),
        process=process,
        log_path=files.log,
        timeout_seconds=READY_TIMEOUT_SECONDS,
    )
    print(f"Kueue {cache.pins.version(MODULE)} is running (webhooks at {url}, log {files.log})", file=out)
    return Started(process, record, url, health, {WEBHOOK_PORT: webhook_port, HEALTH_PORT: health_port})


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (our own loopback URL)
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def uninstall_webhooks(bin_dir: Path, admin_kubeconfig: Path) -> None:
    """Remove Kueue's webhook configurations (a stopped Kueue's webhooks would refuse its objects)."""
    for kind, name in WEBHOOK_CONFIGURATIONS.items():
        kubectl_apply(bin_dir, admin_kubeconfig, "delete", kind.lower(), name, "--ignore-not-found")


def managed_namespace_labels() -> dict[str, str]:
    """The labels a namespace needs for Kueue to act in it."""
    return {MANAGED_LABEL: "true"}


def add_to_plane(state: ClusterState, *, out: TextIO) -> ClusterState:
    """Kueue started (built first if missing) against the running plane and recorded in its state, so
    `dev status` lists it, `dev restart kueue` restarts it and `dev down` stops it. A Kueue the state
    already records as running is kept."""
    existing = state.record(COMPONENT)
    if existing is not None and processes.is_running(existing):
        return state
    cache = BinaryCache.for_build(KUEUE)
    cache.ensure(wait=True, out=out)
    started = install_and_start(
        directory=state.directory,
        bin_dir=state.bin_dir,
        server=state.server,
        admin_kubeconfig=state.kubeconfig,
        cache=cache,
        out=out,
    )
    others = tuple(record for record in state.processes if record.name != COMPONENT)
    updated = dataclasses.replace(
        state, ports={**state.ports, **started.ports}, processes=(*others, started.record), stopped=False
    )
    updated.save()
    return updated


def remove_from_plane(state: ClusterState) -> ClusterState:
    """Kueue stopped, its webhooks removed and its record dropped from the plane's state: the plane as
    it was before `add_to_plane`. A stopped record left behind would make the plane read as not fully
    running (`ClusterState.is_fully_running`) to whoever looks at it next."""
    # As the state file has it now: Kueue may have been restarted since `state` was read.
    current = ClusterState.load(state.directory) or state
    record = current.record(COMPONENT)
    if record is not None:
        processes.stop(record)
    # A stopped Kueue's webhooks would refuse Kueue objects; the scoped ones touch nobody else.
    uninstall_webhooks(current.bin_dir, current.kubeconfig)
    others = tuple(kept for kept in current.processes if kept.name != COMPONENT)
    updated = dataclasses.replace(current, processes=others)
    updated.save()
    return updated
