#!/usr/bin/env bash
# Validates the Kubernetes manifests of this directory against the Kubernetes API schema,
# offline: kubernetes-validate (PyPI) carries the API's JSON schemas for each Kubernetes
# version, so no cluster is needed (`kubectl apply --dry-run=client --validate=strict` needs a
# server to fetch the OpenAPI document from). Strict: unknown fields are refused.
# Then checks that a deliberately broken manifest (broken/) IS refused, so a check that cannot
# fail is caught. Used by .ci/run; installs its validator into target/k8s-validate once.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
kube_version=1.32.0
venv="$root/target/k8s-validate"
validator="$venv/bin/kubernetes-validate"

if [ ! -x "$validator" ]; then
    if ! command -v python3 >/dev/null || ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
        echo "k8s: installing python3 and python3-venv"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q
        apt-get install -y -q python3 python3-venv
    fi
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q 'kubernetes-validate==1.37.0'
fi

"$validator" --strict -k "$kube_version" "$here"/*.yaml

if refusal=$("$validator" --strict --quiet -k "$kube_version" "$here"/broken/*.yaml 2>&1); then
    echo "k8s: FAILED: the broken manifests in $here/broken validated: the check cannot fail" >&2
    exit 1
fi
if ! grep -q "broken/shards-job.yaml did not validate" <<<"$refusal"; then
    echo "k8s: FAILED: broken/ was refused, but not as a schema violation:" >&2
    echo "$refusal" >&2
    exit 1
fi
echo "k8s: the broken manifests in broken/ are refused, as they must be"
