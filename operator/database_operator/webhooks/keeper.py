"""Where the webhooks' certificate comes from, and making the API server trust it.

Three modes (settings, in this order):

- files (``--webhook-cert-dir``): tls.crt and tls.key from a mounted Secret, e.g. cert-manager's,
  re-read when they change; cert-manager's CA injector writes the caBundles.
- in-cluster, self-managed (``--webhook-service``): the operator keeps its own CA and serving
  certificate in a Secret (``--webhook-secret``) that every replica shares — the first to start
  creates it, a 409 means another one did — renews the serving certificate before it expires,
  and writes the CA into the caBundle of its webhook configurations and of the CRD's
  conversion stanza, all of which the chart (or config/) installed.
- local (``--webhook-url``): the operator runs outside the cluster (`make demo`, tests): an
  in-memory CA and certificate for the URL's host, and it registers URL-based webhook
  configurations and the CRD's conversion itself; it removes the configurations when it stops.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from database_operator.api.models import CRD_NAME
from database_operator.clock import Clock, system_clock
from database_operator.config import Settings
from database_operator.kube.api import Kube
from database_operator.kube.errors import ApiError
from database_operator.logs import get_logger
from database_operator.manifest import Manifest
from database_operator.webhooks import configuration
from database_operator.webhooks.certificates import (
    KeyPair,
    ca_is_current,
    new_ca,
    new_serving,
    serving_is_current,
)
from database_operator.webhooks.namespaces import NamespaceAnnotations
from database_operator.webhooks.server import OnAnswer, WebhookServer

#: How often the keeper re-checks its certificate files, Secret and caBundles.
CHECK_INTERVAL_S = 300.0
FILES_CHECK_INTERVAL_S = 60.0


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class Keeper:
    """Keeps the server's certificate current and trusted; one per process."""

    def __init__(self, kube: Kube, settings: Settings, clock: Clock = system_clock) -> None:
        self.kube = kube
        self.settings = settings
        self.clock = clock
        self.log = get_logger()

    async def first(self) -> KeyPair:
        """The certificate to start serving with."""
        raise NotImplementedError

    async def keep(self, server: WebhookServer) -> None:
        """Until cancelled: renew or re-read the certificate, re-assert the trust."""
        raise NotImplementedError

    async def close(self) -> None:
        """On a clean stop."""


class FilesKeeper(Keeper):
    """tls.crt/tls.key from a folder (a mounted Secret); trust is someone else's job."""

    @property
    def folder(self) -> Path:
        return Path(str(self.settings.webhook_cert_dir))

    def _read(self) -> KeyPair:
        folder = self.folder
        return KeyPair((folder / "tls.crt").read_bytes(), (folder / "tls.key").read_bytes())

    async def first(self) -> KeyPair:
        return self._read()

    async def keep(self, server: WebhookServer) -> None:
        digest = hashlib.sha256(repr(self._read()).encode()).hexdigest()
        while True:
            await asyncio.sleep(FILES_CHECK_INTERVAL_S)
            with contextlib.suppress(OSError):  # mid-update by the kubelet: next time
                pair = self._read()
                now = hashlib.sha256(repr(pair).encode()).hexdigest()
                if now != digest:
                    server.use(pair)
                    digest = now
                    self.log.info("webhook certificate reloaded", folder=str(self.folder))


class TrustingKeeper(Keeper):
    """A keeper that owns a CA and must make the API server trust it."""

    ca: KeyPair

    def hosts(self) -> list[str]:
        raise NotImplementedError

    def client_for(self, path: str) -> configuration.ClientConfig:
        raise NotImplementedError

    async def trust(self) -> None:
        """Write the CA into the caBundles (and, locally, the whole registration)."""
        raise NotImplementedError

    async def refresh(self) -> KeyPair | None:
        """Renew what is due; the new serving pair, or None when the one in use stays."""
        raise NotImplementedError

    async def keep(self, server: WebhookServer) -> None:
        while True:
            await asyncio.sleep(CHECK_INTERVAL_S)
            try:
                pair = await self.refresh()
                if pair is not None:
                    server.use(pair)
                await self.trust()
            except ApiError as error:
                self.log.warning("cannot check the webhook certificate", error=str(error))


class SecretKeeper(TrustingKeeper):
    """In the cluster: CA and serving certificate in a Secret shared by the replicas."""

    serving: KeyPair | None = None

    @property
    def service(self) -> tuple[str, str]:
        namespace, name = str(self.settings.webhook_service).split("/", 1)
        return namespace, name

    def hosts(self) -> list[str]:
        namespace, name = self.service
        return [f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local"]

    def client_for(self, path: str) -> configuration.ClientConfig:
        namespace, name = self.service
        return configuration.service_client(namespace, name, path)

    async def first(self) -> KeyPair:
        pair = await self.refresh()
        await self._trust_logged()
        return pair or self._serving()

    def _serving(self) -> KeyPair:
        assert self.serving is not None
        return self.serving

    async def refresh(self) -> KeyPair | None:
        """Read (or make) the Secret; the serving pair when it differs from the one in use."""
        namespace, _ = self.service
        name = self.settings.webhook_secret
        conflict: ApiError | None = None
        for _attempt in range(5):
            secret = await self.kube.get_live("Secret", namespace, name)
            data = _decoded(secret)
            now = self.clock()
            ca = KeyPair(data.get("ca.crt", b""), data.get("ca.key", b""))
            serving = KeyPair(data.get("tls.crt", b""), data.get("tls.key", b""))
            if not ca_is_current(ca, now):
                ca = new_ca(now)
            if not serving_is_current(ca, serving, self.hosts(), now):
                serving = new_serving(ca, self.hosts(), now)
            wanted = {
                "ca.crt": ca.cert,
                "ca.key": ca.key,
                "tls.crt": serving.cert,
                "tls.key": serving.key,
            }
            if data != wanted:
                try:
                    await self._store(secret, namespace, name, wanted)
                except ApiError as error:
                    if error.stale:  # another replica wrote it first: read theirs
                        conflict = error
                        continue
                    raise
                self.log.info("webhook certificate written", secret=f"{namespace}/{name}")
            self.ca = ca
            changed = serving != self.serving
            self.serving = serving
            return serving if changed else None
        # Every attempt lost to another writer: the last of those answers, as the server gave it.
        assert conflict is not None
        raise conflict

    async def _store(
        self, secret: Manifest | None, namespace: str, name: str, data: dict[str, bytes]
    ) -> None:
        body: Manifest = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/name": "database-operator"},
            },
            "data": {key: _b64(value) for key, value in data.items()},
        }
        if secret is None:
            await self.kube.create(body)
        else:
            body["metadata"]["resourceVersion"] = secret["metadata"]["resourceVersion"]
            await self.kube.replace(body)

    async def _trust_logged(self) -> None:
        try:
            await self.trust()
        except ApiError as error:  # the next check tries again; admission fails until then
            self.log.warning("cannot write the webhook caBundle yet", error=str(error))

    async def trust(self) -> None:
        bundle = _b64(self.ca.cert)
        for hook in configuration.HOOKS:
            await self._set_bundle(hook.kind, bundle)
        crd = await self.kube.get_live("CustomResourceDefinition", "", CRD_NAME)
        client = (((crd or {}).get("spec") or {}).get("conversion") or {}).get("webhook", {})
        if crd is not None and client.get("clientConfig", {}).get("caBundle") != bundle:
            await self.kube.merge_patch(
                "CustomResourceDefinition",
                "",
                CRD_NAME,
                {"spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": bundle}}}}},
            )
            self.log.info("caBundle written", crd=CRD_NAME)

    async def _set_bundle(self, kind: str, bundle: str) -> None:
        name = self.settings.webhook_configuration
        found = await self.kube.get_live(kind, "", name)
        if found is None:
            self.log.warning("webhook configuration missing", kind=kind, name=name)
            return
        ours = {hook.name for hook in configuration.HOOKS}
        changed = False
        for entry in found.get("webhooks") or []:
            client = entry.setdefault("clientConfig", {})
            if entry.get("name") in ours and client.get("caBundle") != bundle:
                client["caBundle"] = bundle
                changed = True
        if changed:
            await self.kube.replace(found)
            self.log.info("caBundle written", kind=kind, name=name)


class LocalKeeper(TrustingKeeper):
    """Outside the cluster: an in-memory CA; the operator registers its webhooks by URL."""

    def hosts(self) -> list[str]:
        return [urlsplit(str(self.settings.webhook_url)).hostname or "127.0.0.1"]

    def client_for(self, path: str) -> configuration.ClientConfig:
        return configuration.url_client(str(self.settings.webhook_url), path)

    async def first(self) -> KeyPair:
        now = self.clock()
        self.ca = new_ca(now)
        await self.trust()
        return new_serving(self.ca, self.hosts(), now)

    async def refresh(self) -> KeyPair | None:
        return None  # a year-long certificate outlives a local run

    def registration(self) -> list[Manifest]:
        return configuration.configurations(
            self.settings.webhook_configuration,
            lambda path: configuration.with_ca(self.client_for(path), self.ca.cert),
            configuration.namespace_selector(self.settings.namespaces, None),
            {"app.kubernetes.io/name": "database-operator"},
        )

    async def trust(self) -> None:
        for wanted in self.registration():
            found = await self.kube.get_live(wanted["kind"], "", wanted["metadata"]["name"])
            if found is None:
                await self.kube.create(wanted)
            elif found.get("webhooks") != wanted["webhooks"]:
                wanted["metadata"]["resourceVersion"] = found["metadata"]["resourceVersion"]
                await self.kube.replace(wanted)
        client: dict[str, Any] = configuration.with_ca(
            self.client_for(configuration.CONVERT_PATH), self.ca.cert
        )
        await self.kube.merge_patch(
            "CustomResourceDefinition",
            "",
            CRD_NAME,
            # service: null drops the in-cluster Service the generated CRD names.
            {"spec": {"conversion": configuration.conversion({**client, "service": None})}},
        )

    async def close(self) -> None:
        """A local operator's URL dies with it: unregister, so the cluster is not left refusing
        every Database write (a crash leaves them; the failurePolicy then applies)."""
        for hook in configuration.HOOKS:
            found = await self.kube.get_live(hook.kind, "", self.settings.webhook_configuration)
            if found is not None:
                await self.kube.delete(
                    hook.kind, "", self.settings.webhook_configuration, found["metadata"]["uid"]
                )


def _decoded(secret: Manifest | None) -> dict[str, bytes]:
    raw = (secret or {}).get("data") or {}
    return {key: base64.b64decode(value) for key, value in raw.items()}


def keeper_for(kube: Kube, settings: Settings) -> Keeper:
    if settings.webhook_cert_dir:
        return FilesKeeper(kube, settings)
    if settings.webhook_url:
        return LocalKeeper(kube, settings)
    return SecretKeeper(kube, settings)


class WebhookServing:
    """Serving the webhooks: the server, its certificate's keeper and the namespaces' watch
    (namespaces.py), started before Kopf and stopped after it."""

    def __init__(self, kube: Kube, settings: Settings, on_answer: OnAnswer | None = None) -> None:
        self.kube = kube
        self.server = WebhookServer(settings.webhook_address, settings.webhook_port, on_answer)
        self.keeper = keeper_for(kube, settings)
        self.namespaces = NamespaceAnnotations(settings.namespaces)
        self._keeping: asyncio.Task[None] | None = None
        self._following: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Serve; again after Kopf stopped the server (lifecycle.py runs Kopf anew)."""
        if self._keeping is not None:
            self._keeping.cancel()
        await self.server.start(await self.keeper.first())
        self._keeping = asyncio.create_task(self.keeper.keep(self.server))
        if self._following is None:
            self._following = asyncio.create_task(self.namespaces.follow(self.kube))

    async def stop(self) -> None:
        for task in (self._keeping, self._following):
            if task is not None:
                task.cancel()
        self._following = None
        await self.server.stop()
        with contextlib.suppress(ApiError):
            await self.keeper.close()
