"""The shipped topology, run as Compose and Kubernetes would run it, end to end.

For compose on PostgreSQL 15 and 18 (the services script's, standing in for the
`postgres` service) and for the k8s manifests: the init script creates the worker's
role with exactly its privileges, the setup container installs the DDL capture and the
slot with the superuser's credentials, the worker container runs as that role from the
image's ENTRYPOINT and CMD, publishes the init script's rows and rows inserted
afterwards to Kafka, answers the image's HEALTHCHECK, and exits 0 on SIGTERM.
tests/deploy/topology_support.py says how the engine's names and paths are mapped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.topology_support import (
    CONFIG_PATH,
    DEPLOY,
    ROOT,
    Deployment,
    ImageTree,
    Mapping,
    check_role,
    compose_env,
    compose_service,
    dockerfile_final_stage,
    image_json,
    k8s_config,
    k8s_container,
    k8s_env,
    publishes_and_stops,
    pyproject,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> ImageTree:
    return ImageTree.build(tmp_path_factory.mktemp("image"))


@pytest.fixture
def deployment(
    request: pytest.FixtureRequest,
    image: ImageTree,
    kafka: dict[str, Any],
    registry: dict[str, Any],
    tmp_path: Path,
) -> Iterator[Deployment]:
    pg = request.getfixturevalue(str(request.param))
    d = Deployment(Mapping(pg, kafka, registry, tmp_path), image)
    try:
        yield d
    finally:
        d.drop()


def test_the_image_is_what_the_topology_test_runs(image: ImageTree) -> None:
    """The Dockerfile's final stage takes nothing from the checkout but the installed
    wheel, built by maturin from the packages pyproject names; its entrypoint is the
    console script the test calls, run as the pgcdc user; and the wheel's contents, as
    the test lays them out, carry the Avro schemas (schemas/, beside the packages, where
    connectors.schemas looks) and the SQL of the DDL capture."""
    stage = dockerfile_final_stage()
    copies = [line for line in stage if line.startswith(("COPY", "ADD"))]
    assert copies == ["COPY --from=build /install /usr/local"]
    build = (ROOT / "Dockerfile").read_text()
    assert "maturin build --release --out /wheels" in build
    assert "pip install --no-cache-dir --prefix=/install /wheels/*.whl" in build
    packages = pyproject()["tool"]["maturin"]["python-packages"]
    for package in packages:
        assert f"COPY {package} ./{package}" in build
    assert image_json("ENTRYPOINT") == ["pgcdc"]
    assert "pgcdc" in pyproject()["project"]["scripts"]
    assert "USER pgcdc" in stage
    names = {str(p) for p in image.files}
    avsc = {p.name for p in (image.root / "schemas").glob("*.avsc")}
    assert {"offsets.avsc", "source.avsc", "transaction_value.avsc"} <= avsc
    assert "connectors/postgres/sql/ddl_capture.sql" in names
    assert not any(n.startswith("service/native/") for n in names)
    assert {n.split("/")[0] for n in names} == {*packages, "schemas"}


@pytest.mark.parametrize("deployment", ["pg15", "pg18"], indirect=True)
def test_compose_topology_publishes_rows(deployment: Deployment) -> None:
    """docker-compose.yml as compose runs it: the postgres service's init script with
    its environment, `pgcdc-setup`'s command and environment (the superuser's
    credentials), then `pgcdc` with the image's CMD and its environment (the init
    script's role): rows reach Kafka, and SIGTERM ends the worker with exit 0."""
    d, m = deployment, deployment.mapping
    version = int(m.pg["version"])
    d.init_database(compose_env("postgres"))
    check_role(d, version)
    setup = compose_service("pgcdc-setup")
    worker = compose_service("pgcdc")
    assert "command" not in worker  # the image's CMD
    for service in (setup, worker):  # both mount the one config file
        assert f"./pgcdc/config.yaml:{CONFIG_PATH}:ro" in service["volumes"]
    m.config(
        yaml.safe_load((DEPLOY / "pgcdc" / "config.yaml").read_text()),
        "postgres",
        "kafka:9092",
        "http://registry:8080/apis/ccompat/v7",
    )
    report = json.loads(d.run_once(setup["command"], compose_env("pgcdc-setup")))
    assert report["slot_created"] and report["ddl_capture_installed"], report
    assert report["server_version"] == version
    publishes_and_stops(d, image_json("CMD"), compose_env("pgcdc"))


@pytest.mark.parametrize("deployment", ["pg15", "pg18"], indirect=True)
def test_k8s_topology_publishes_rows(deployment: Deployment) -> None:
    """deploy/k8s as the kubelet runs it: the `setup` init container's args and
    environment (pgcdc-setup-secrets), then the `pgcdc` container's (pgcdc-secrets),
    with the ConfigMap's config, against a role the init script made with the worker
    secret's password: rows reach Kafka, and SIGTERM ends the worker with exit 0."""
    d, m = deployment, deployment.mapping
    version = int(m.pg["version"])
    worker = k8s_container("pgcdc")
    worker_env = k8s_env(worker)
    d.init_database(
        {"POSTGRES_DB": "app", "PGCDC_DB_PASSWORD": worker_env["PGCDC_SOURCE__PASSWORD"]}
    )
    check_role(d, version)
    m.config(
        k8s_config(),
        "postgres.database.svc.cluster.local",
        "kafka.kafka.svc.cluster.local:9092",
        "http://apicurio-registry.registry.svc.cluster.local:8080/apis/ccompat/v7",
    )
    setup = k8s_container("setup")
    report = json.loads(d.run_once(setup["args"], k8s_env(setup)))
    assert report["slot_created"] and report["ddl_capture_installed"], report
    publishes_and_stops(d, worker["args"], worker_env)
