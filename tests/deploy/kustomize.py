"""A kustomize build in Python, for exactly the kustomization fields deploy/k8s uses, so the manifests are checked
on any machine; where `kubectl` is installed, test_components.py compares every build with `kubectl kustomize`.

Implemented, in the order kustomize 5 applies them (measured against `kubectl kustomize`): resources (files and
directories), then the kustomization's own configMapGenerator and secretGenerator (literals, env files; behaviors
create, merge and replace; fixed names only), then its components (each one the same way, on everything so far),
then its namespace, labels and images transformers. So a generator cannot merge into or replace an object that a
component adds, and a component's transformers see the generated objects. A kustomization using any other field
fails here instead of being half-built.
"""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import yaml

KUSTOMIZATION_KEYS = {"apiVersion", "kind", "namespace", "labels", "resources", "components", "images",
                      "generatorOptions", "configMapGenerator", "secretGenerator"}  # fmt: skip
GENERATOR_KEYS = {"name", "namespace", "behavior", "literals", "envs", "options"}
API_VERSIONS = {"Kustomization": "kustomize.config.k8s.io/v1beta1", "Component": "kustomize.config.k8s.io/v1alpha1"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume", "StorageClass",
                  "CustomResourceDefinition", "PriorityClass", "IngressClass"}  # fmt: skip
POD_TEMPLATE_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet"}

Obj = dict[str, Any]


def load_kustomization(folder: Path, kind: str = "Kustomization") -> dict[str, Any]:
    data = yaml.safe_load((folder / "kustomization.yaml").read_text())
    unknown = set(data) - KUSTOMIZATION_KEYS
    assert not unknown, f"{folder}: kustomization uses {sorted(unknown)}: teach tests/deploy/kustomize.py about them"
    assert data.get("kind") == kind, f"{folder}: a {kind} was expected, found {data.get('kind')}"
    assert data.get("apiVersion") == API_VERSIONS[kind], f"{folder}: apiVersion {data.get('apiVersion')}"
    return data


def build(folder: Path) -> list[Obj]:
    """`kustomize build folder`."""
    return _accumulate(folder, "Kustomization", [])


def _accumulate(folder: Path, kind: str, objects: list[Obj]) -> list[Obj]:
    """A Kustomization starts from nothing; a Component works on its parent's objects."""
    kustomization = load_kustomization(folder, kind)
    for entry in kustomization.get("resources", []):
        path = folder / entry
        if path.is_dir():
            objects.extend(_accumulate(path, "Kustomization", []))
        else:
            objects.extend(copy.deepcopy(doc) for doc in yaml.safe_load_all(path.read_text()) if doc)
    _generate(folder, kustomization, objects)
    for entry in kustomization.get("components", []):
        objects = _accumulate(folder / entry, "Component", objects)
    _set_namespace(kustomization.get("namespace"), objects)
    for entry in kustomization.get("labels", []):
        _add_labels(entry, objects)
    for rule in kustomization.get("images", []):
        _set_image(rule, objects)
    return objects


def _read_env_file(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f"{path}: not KEY=VALUE: {line!r}"
            values[key] = value
    return values


def _generate(folder: Path, kustomization: dict[str, Any], objects: list[Obj]) -> None:
    defaults = kustomization.get("generatorOptions", {})
    for kind, key in (("ConfigMap", "configMapGenerator"), ("Secret", "secretGenerator")):
        for generator in kustomization.get(key, []):
            unknown = set(generator) - GENERATOR_KEYS
            assert not unknown, f"{folder}: {key} uses {sorted(unknown)}"
            options = {**defaults, **generator.get("options", {})}
            assert set(options) <= {"disableNameSuffixHash"}, f"{folder}: generator options {options}"
            data: dict[str, str] = {}
            for literal in generator.get("literals", []):
                name, _, value = literal.partition("=")
                data[name] = value
            for env in generator.get("envs", []):
                data.update(_read_env_file(folder / env))
            if kind == "Secret":
                data = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
            name, behavior = generator["name"], generator.get("behavior", "create")
            namespace = generator.get("namespace")
            matches = [
                o
                for o in objects
                if o["kind"] == kind
                and o["metadata"]["name"] == name
                and (namespace is None or o["metadata"].get("namespace") in (None, namespace))
            ]
            if behavior == "create":
                assert not matches, f"{folder}: {kind} {name} exists already: use behavior merge or replace"
                # A generated name gets a content hash unless told otherwise; hashes are not implemented here.
                assert options.get("disableNameSuffixHash"), f"{folder}: {kind} {name}: set disableNameSuffixHash"
                generated: Obj = {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}, "data": data}
                if namespace:
                    generated["metadata"]["namespace"] = namespace
                if kind == "Secret":
                    generated["type"] = "Opaque"
                objects.append(generated)
                continue
            assert len(matches) == 1, f"{folder}: {behavior} needs exactly one {kind} {name}, found {len(matches)}"
            (target,) = matches
            if behavior == "replace":
                target.pop("stringData", None)
                target["data"] = data
            else:
                assert behavior == "merge", f"{folder}: behavior {behavior}"
                assert "stringData" not in target, f"{folder}: merging into stringData is not implemented"
                target["data"] = {**target.get("data", {}), **data}
            if kind == "Secret":
                target["type"] = "Opaque"


def _set_namespace(namespace: str | None, objects: list[Obj]) -> None:
    if namespace:
        for obj in objects:
            if obj["kind"] not in CLUSTER_SCOPED:
                obj.setdefault("metadata", {})["namespace"] = namespace


def pod_template(obj: Obj) -> Obj | None:
    if obj["kind"] in POD_TEMPLATE_KINDS:
        return obj["spec"]["template"]
    if obj["kind"] == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]
    return None


def pod_spec(obj: Obj) -> Obj | None:
    template = pod_template(obj)
    return template["spec"] if template else None


def all_containers(spec: Obj) -> list[Obj]:
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def _add_labels(entry: dict[str, Any], objects: list[Obj]) -> None:
    assert set(entry) <= {"pairs", "includeSelectors", "includeTemplates"}, entry
    # includeSelectors would rewrite selectors, which are immutable on a live Deployment or StatefulSet.
    assert not entry.get("includeSelectors"), "includeSelectors: true is not implemented (and not wanted)"
    for obj in objects:
        obj.setdefault("metadata", {}).setdefault("labels", {}).update(entry["pairs"])
        template = pod_template(obj)
        if entry.get("includeTemplates") and template is not None:
            template.setdefault("metadata", {}).setdefault("labels", {}).update(entry["pairs"])
            for claim in obj["spec"].get("volumeClaimTemplates", []) if obj["kind"] == "StatefulSet" else []:
                claim.setdefault("metadata", {}).setdefault("labels", {}).update(entry["pairs"])


def split_image(image: str) -> tuple[str, str | None, str | None]:
    """name, tag, digest."""
    name, _, digest = image.partition("@")
    tag = None
    if ":" in name.rsplit("/", 1)[-1]:
        name, tag = name.rsplit(":", 1)
    return name, tag, digest or None


def _set_image(rule: dict[str, Any], objects: list[Obj]) -> None:
    for obj in objects:
        spec = pod_spec(obj)
        for container in all_containers(spec) if spec else []:
            name, tag, digest = split_image(container["image"])
            if name == rule["name"]:
                name = rule.get("newName", name)
                tag = rule.get("newTag", tag)
                digest = rule.get("digest", digest)
                container["image"] = name + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")


def by_kind(objects: list[Obj], kind: str) -> dict[str, Obj]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def workloads(objects: list[Obj]) -> list[Obj]:
    return [o for o in objects if pod_spec(o) is not None]


def selects(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels + matchExpressions) against a set of labels; an empty selector selects all."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not ok:
            return False
    return True
