"""docker-compose.tls.yml and deploy/k8s/tls as their tools combine them with the base.

`compose_merge` merges a second compose file over the first as `docker compose -f A -f B`
does, with compose-spec's rules for the keys the override uses (environment and
depends_on merged by key, volumes, secrets and ports appended, command replaced) and an
AssertionError for any other, or for an entry that would replace a base one instead of
adding to it. `compose_mounts` lists a merged service's files as the engine mounts them.

`kustomize` builds a kustomization's documents as `kubectl apply -k` does: resources,
then patches, each merged by `strategic_merge` with the Kubernetes patch merge keys of
the lists those patches touch (containers, initContainers, env and volumes by name,
volumeMounts by mountPath) and `$patch: delete`; any other list or directive is an
AssertionError. Both only read the shipped files; tests/deploy/topology_support.py runs
what they yield.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.topology_support import COMPOSE, DEPLOY, K8S, resolve_compose

COMPOSE_TLS = DEPLOY / "docker-compose.tls.yml"
K8S_TLS = K8S / "tls"
# The files of docker-compose.tls.yml the user provides (make-demo-tls.sh), by the first
# component of their path relative to deploy/; every other bind mount is a shipped file.
USER_FILES = ("tls", "secrets")


# --- compose files merged, as `docker compose -f A -f B` merges them ----------------------

# compose-spec's merge rules ("Merge and override"), only those the override needs:
_COMPOSE_MAPPINGS = {"environment", "depends_on"}  # merged by key, the override's winning
_COMPOSE_UNIQUE = {"volumes", "secrets", "ports"}  # appended; one with the same target
# as a base entry would replace it instead, which the override must not rely on
_COMPOSE_REPLACED = {"command"}  # the override's replaces the base's


def _compose_target(key: str, entry: Any) -> str:
    """What makes a `volumes`, `secrets` or `ports` entry unique in compose."""
    if key == "volumes":
        return str(entry).split(":")[1] if isinstance(entry, str) else str(entry["target"])
    if key == "secrets":
        name = entry if isinstance(entry, str) else entry.get("target", entry["source"])
        return f"/run/secrets/{name}"
    return str(entry).split(":")[0]  # ports, "published:target"


def _compose_service_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in over.items():
        if key not in merged:
            merged[key] = copy.deepcopy(value)
        elif key in _COMPOSE_MAPPINGS:
            assert isinstance(merged[key], dict) and isinstance(value, dict), key
            merged[key] = {**merged[key], **value}
        elif key in _COMPOSE_UNIQUE:
            taken = {_compose_target(key, e) for e in merged[key]}
            added = [_compose_target(key, e) for e in value]
            assert not taken & set(added), f"{key} {taken & set(added)} replaced, not added"
            merged[key] = [*merged[key], *copy.deepcopy(value)]
        elif key in _COMPOSE_REPLACED:
            merged[key] = copy.deepcopy(value)
        else:
            raise AssertionError(f"the override sets {key} of a base service: no rule for it")
    return merged


def compose_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` over `base`, as compose merges a second -f file (module docstring)."""
    assert set(over) <= {"services", "secrets"}, set(over)
    merged = copy.deepcopy(base)
    for name, service in over["services"].items():
        merged["services"][name] = _compose_service_merge(merged["services"].get(name, {}), service)
    assert not set(over.get("secrets", {})) & set(merged.get("secrets", {}))
    merged["secrets"] = {**merged.get("secrets", {}), **over.get("secrets", {})}
    return merged


def compose_tls() -> dict[str, Any]:
    """docker-compose.yml with docker-compose.tls.yml over it."""
    return compose_merge(
        yaml.safe_load(COMPOSE.read_text()), yaml.safe_load(COMPOSE_TLS.read_text())
    )


def compose_tls_env(name: str) -> dict[str, str]:
    env = compose_tls()["services"][name].get("environment", {})
    return {k: resolve_compose(str(v)) for k, v in env.items()}


def compose_mounts(name: str, files: Path) -> dict[str, Path]:
    """The merged service's files, container path -> host path: its bind mounts (of the
    user's files, USER_FILES, under `files`; of shipped ones under deploy/) and its
    compose secrets (/run/secrets/<target>, each the file its top-level entry names)."""
    doc = compose_tls()
    service = doc["services"][name]
    mounts: dict[str, Path] = {}
    for entry in service.get("volumes", []):
        source, target = str(entry).split(":")[:2]
        if not source.startswith("./"):
            continue  # a named volume: the state directory, mapped as STATE_ROOT
        root = files if Path(source[2:]).parts[0] in USER_FILES else DEPLOY
        mounts[target] = root / source[2:]
    for entry in service.get("secrets", []):
        source = entry if isinstance(entry, str) else entry["source"]
        declared = doc["secrets"][source]["file"]
        assert declared.startswith("./") and Path(declared[2:]).parts[0] in USER_FILES
        mounts[_compose_target("secrets", entry)] = files / declared[2:]
    return mounts


# --- the k8s overlay, as `kubectl apply -k` builds it -------------------------------------

# Strategic merge patch's list rules, the patch merge keys of the Kubernetes types these
# patches touch (a list under another key would be replaced, which no patch relies on).
_SMP_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumes": "name",
}


def _smp_list(base: list[Any], patch: list[Any], key: str, where: str) -> list[Any]:
    merged = [copy.deepcopy(item) for item in base]
    for item in patch:
        found = [i for i, b in enumerate(merged) if b[key] == item[key]]
        if "$patch" in item:
            assert item["$patch"] == "delete" and set(item) == {key, "$patch"}, item
            # The API server ignores a delete of nothing; in a shipped patch it is a mistake.
            assert found, f"{where}: deletes {item[key]}, which is not there"
            del merged[found[0]]
        elif found:
            merged[found[0]] = strategic_merge(merged[found[0]], item, where)
        else:
            merged.append(copy.deepcopy(item))
    return merged


def strategic_merge(base: Any, patch: Any, where: str = "") -> Any:
    """`patch` over `base` by strategic merge (maps merged, lists of _SMP_MERGE_KEYS by
    their key with `$patch: delete`, everything else replaced)."""
    assert isinstance(base, dict) and isinstance(patch, dict), where
    merged = copy.deepcopy(base)
    for key, value in patch.items():
        assert not key.startswith("$"), f"{where}.{key}: no such directive implemented"
        if isinstance(value, list):
            assert key in _SMP_MERGE_KEYS, f"{where}.{key}: a list with no merge rule here"
            merged[key] = _smp_list(
                merged.get(key, []), value, _SMP_MERGE_KEYS[key], f"{where}.{key}"
            )
        elif isinstance(value, dict) and key in merged:
            merged[key] = strategic_merge(merged[key], value, f"{where}.{key}")
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def kustomize(directory: Path) -> list[dict[str, Any]]:
    """The documents `kubectl apply -k directory` applies: its resources (files, or
    directories built alike), then each patch merged into the one document of its kind
    and name. `labels` only adds labels, which run nothing: not applied."""
    doc = yaml.safe_load((directory / "kustomization.yaml").read_text())
    assert set(doc) <= {"apiVersion", "kind", "resources", "patches", "labels"}, set(doc)
    docs: list[dict[str, Any]] = []
    for resource in doc["resources"]:
        path = directory / resource
        if path.is_dir():
            docs += kustomize(path)
        else:  # a JSON round trip: YAML anchors (&mounts) shared nothing after a merge
            docs += [json.loads(json.dumps(d)) for d in yaml.safe_load_all(path.read_text()) if d]
    for patch in doc.get("patches", []):
        assert set(patch) == {"path"}, patch
        change = yaml.safe_load((directory / patch["path"]).read_text())
        ident = (change["kind"], change["metadata"]["name"])
        (index,) = [i for i, d in enumerate(docs) if (d["kind"], d["metadata"]["name"]) == ident]
        docs[index] = strategic_merge(docs[index], change, f"{ident}")
    return docs


def k8s_tls_container(name: str) -> dict[str, Any]:
    (deployment,) = [d for d in kustomize(K8S_TLS) if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = [c for c in [*pod["initContainers"], *pod["containers"]] if c["name"] == name]
    return dict(container)


def k8s_tls_config() -> dict[str, Any]:
    (configmap,) = [d for d in kustomize(K8S_TLS) if d["kind"] == "ConfigMap"]
    doc: dict[str, Any] = yaml.safe_load(configmap["data"]["config.yaml"])
    return doc


def k8s_tls_mounts(container: dict[str, Any], secrets_root: Path) -> dict[str, Path]:
    """The container's Secret volumes, mount path -> `secrets_root/<Secret name>`."""
    (deployment,) = [d for d in kustomize(K8S_TLS) if d["kind"] == "Deployment"]
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    return {
        m["mountPath"]: secrets_root / volumes[m["name"]]["secret"]["secretName"]
        for m in container["volumeMounts"]
        if "secret" in volumes[m["name"]]
    }


def k8s_tls_secret_modes() -> dict[str, int]:
    """Secret name -> the mode its files get (the volume's defaultMode)."""
    (deployment,) = [d for d in kustomize(K8S_TLS) if d["kind"] == "Deployment"]
    return {
        v["secret"]["secretName"]: int(v["secret"]["defaultMode"])
        for v in deployment["spec"]["template"]["spec"]["volumes"]
        if "secret" in v
    }
