"""The Kubernetes builds every deploy test looks at, made once per session from a copy of deploy/k8s.

- `base`: deploy/k8s/base, what `kubectl apply -k deploy/k8s/base` applies;
- `with-<component>`: the base plus one component of deploy/k8s/components, as an overlay would combine them;
- `all-components`: the base plus every component at once (they must not collide);
- `trial`: deploy/k8s/overlays/trial, after its make-secrets.sh has written the env files it needs.

The copy leaves out any *.env a developer has in overlays/trial (real secrets never reach a test) and holds the
small kustomizations for the `with-*` builds.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.deploy import kustomize
from tests.deploy.common import K8S, NAMESPACE

COMPONENTS = sorted(p.name for p in (K8S / "components").iterdir() if p.is_dir())
# components/in-cluster-postgres asks the including kustomization for this Secret (overlays/trial generates it).
POSTGRES_SECRET = ["POSTGRES_USER=memento", "POSTGRES_PASSWORD=REPLACE_ME_OWNER_PASSWORD", "POSTGRES_DB=memento"]


def _check_kustomization(components: list[str]) -> dict:
    data: dict = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": NAMESPACE,
        "resources": ["../../base"],
        "components": [f"../../components/{c}" for c in components],
    }
    if "in-cluster-postgres" in components:
        data["generatorOptions"] = {"disableNameSuffixHash": True}
        data["secretGenerator"] = [{"name": "memento-postgres", "literals": POSTGRES_SECRET}]
    return data


@pytest.fixture(scope="session")
def k8s_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("deploy") / "k8s"
    shutil.copytree(K8S, root, ignore=shutil.ignore_patterns("*.env"))
    script = root / "overlays" / "trial" / "make-secrets.sh"
    done = subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    checks = {f"with-{c}": [c] for c in COMPONENTS} | {"all-components": COMPONENTS}
    for name, components in checks.items():
        folder = root / "checks" / name
        folder.mkdir(parents=True)
        (folder / "kustomization.yaml").write_text(yaml.safe_dump(_check_kustomization(components)))
    return root


@pytest.fixture(scope="session")
def build_dirs(k8s_tree: Path) -> dict[str, Path]:
    dirs = {"base": k8s_tree / "base", "trial": k8s_tree / "overlays" / "trial"}
    dirs |= {p.name: p for p in sorted((k8s_tree / "checks").iterdir())}
    return dirs


@pytest.fixture(scope="session")
def builds(build_dirs: dict[str, Path]) -> dict[str, list[dict]]:
    return {name: kustomize.build(folder) for name, folder in build_dirs.items()}


@pytest.fixture(scope="session")
def objects(builds: dict[str, list[dict]]) -> list[dict]:
    """The base."""
    return builds["base"]
