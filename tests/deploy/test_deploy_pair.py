"""Static checks of the worker pair's deploy files (README "Failover"): the Compose file
deploy/docker-compose.pair.yml and the Kubernetes overlay deploy/k8s/pair run a second
worker that is the first one again, except for what two workers must not share.

Nothing here starts a container; the takeover itself is measured by
tests/faults/test_takeover.py.
"""

from __future__ import annotations

from typing import Any

import yaml

from tests.deploy.test_deploy_static import (
    DEPLOY,
    K8S,
    METRICS_PORT,
    compose,
    k8s_kind,
    load_yaml,
    mounts_of,
)

COMPOSE_PAIR = DEPLOY / "docker-compose.pair.yml"
K8S_PAIR = K8S / "pair"
SAME = ("image", "build", "environment", "stop_signal", "stop_grace_period", "depends_on")


def _patches() -> dict[str, dict[str, Any]]:
    kustomization = load_yaml(K8S_PAIR / "kustomization.yaml")
    return {
        doc["kind"]: doc
        for patch in kustomization["patches"]
        for doc in yaml.safe_load_all((K8S_PAIR / patch["path"]).read_text())
    }


def test_compose_standby_is_the_worker_with_its_own_state_volume() -> None:
    """pgcdc-standby has the worker's image, config file, environment (hence the same
    transactional.id), stop handling and dependencies; its state volume is its own,
    mounted where the worker's is, and its metrics are published on another port."""
    pair = load_yaml(COMPOSE_PAIR)
    (name,) = pair["services"]
    standby, worker = pair["services"][name], compose()["services"]["pgcdc"]
    for key in SAME:
        assert standby[key] == worker[key], key
    assert standby["restart"] in ("unless-stopped", "always")
    ours, theirs = mounts_of(standby["volumes"]), mounts_of(worker["volumes"])
    assert ours["./pgcdc/config.yaml"] == theirs["./pgcdc/config.yaml"]
    (state,) = set(ours) - {"./pgcdc/config.yaml"}
    assert ours[state] == theirs["pgcdc-state"] and state != "pgcdc-state"
    assert state in pair["volumes"]
    (port,) = standby["ports"]
    host, container = port.split(":")
    assert container == str(METRICS_PORT) and host != str(METRICS_PORT)


def test_k8s_pair_runs_two_workers_one_at_a_time() -> None:
    """The overlay runs two replicas of the base Deployment with the base ConfigMap
    untouched, replaces one pod at a time (never a third), spreads them over nodes,
    probes readiness on /healthz (a standby's /readyz is 503 for as long as it waits),
    gives each pod its own state volume in place of the base's claim, which it deletes,
    and limits drains to one pod with a PodDisruptionBudget over the same pods."""
    kustomization = load_yaml(K8S_PAIR / "kustomization.yaml")
    assert kustomization["resources"][0] == ".."
    patches = _patches()
    assert set(patches) == {"Deployment", "PersistentVolumeClaim"}
    base = k8s_kind("Deployment")
    labels = base["spec"]["selector"]["matchLabels"]
    spec = patches["Deployment"]["spec"]
    assert patches["Deployment"]["metadata"]["name"] == base["metadata"]["name"]
    assert spec["replicas"] == 2
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
    }
    pod = spec["template"]["spec"]
    (term,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"] == labels
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    (container,) = pod["containers"]
    assert container["name"] == base["spec"]["template"]["spec"]["containers"][0]["name"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": METRICS_PORT}
    (volume,) = pod["volumes"]
    base_volumes = {v["name"]: v for v in base["spec"]["template"]["spec"]["volumes"]}
    claim = base_volumes[volume["name"]]["persistentVolumeClaim"]["claimName"]
    assert volume["persistentVolumeClaim"] is None and "emptyDir" in volume
    pvc = patches["PersistentVolumeClaim"]
    assert pvc["metadata"]["name"] == claim and pvc["$patch"] == "delete"
    assert k8s_kind("PersistentVolumeClaim", claim)
    budget = load_yaml(K8S_PAIR / "pdb.yaml")
    assert "pdb.yaml" in kustomization["resources"]
    assert budget["kind"] == "PodDisruptionBudget"
    assert budget["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": labels}}
