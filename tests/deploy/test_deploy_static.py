"""Static checks of deploy/: files parse, metrics exist, compose/k8s/Dockerfile agree.

Nothing here starts a container: the checks read the files and compare them with the
code they configure (service.config.Settings, service.app.metrics.Metrics, pyproject.toml).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase
from pydantic import BaseModel

from service.app.metrics import SLOT_STATS, Metrics
from service.config import Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
EXAMPLE = DEPLOY / "config.example.yaml"
COMPOSE_CONFIG = DEPLOY / "pgcdc" / "config.yaml"
DASHBOARD = DEPLOY / "grafana" / "pgcdc.json"
RULES = DEPLOY / "prometheus" / "rules.yml"
PROMETHEUS = DEPLOY / "prometheus" / "prometheus.yml"
K8S = DEPLOY / "k8s"
K8S_TLS = K8S / "tls"
DOCKERFILE = ROOT / "Dockerfile"
METRICS_PORT = 9187
CONFIG_PATH = "/etc/pgcdc/config.yaml"
SPECIAL_ENV = {"PGCDC_CONFIG", "PGCDC_SECRETS_DIR"}  # read by config.py, not fields
TARGET_LABELS = {"job", "instance"}  # added by Prometheus to every scraped series
PROMETHEUS_BUILTINS = {"up": {"job", "instance"}}


# --- helpers ----------------------------------------------------------------------------


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def compose() -> dict[str, Any]:
    doc: dict[str, Any] = load_yaml(COMPOSE)
    return doc


def k8s_docs() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(K8S.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def k8s_kind(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [
        d
        for d in k8s_docs()
        if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''} in deploy/k8s, got {len(found)}"
    return found[0]


def pod_containers() -> list[dict[str, Any]]:
    spec = k8s_kind("Deployment")["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def configmap_config() -> dict[str, Any]:
    data = k8s_kind("ConfigMap", "pgcdc-config")["data"]["config.yaml"]
    doc: dict[str, Any] = yaml.safe_load(data)
    return doc


def pgcdc_services() -> dict[str, dict[str, Any]]:
    """The compose services running the pgcdc image (the worker and its one-shot setup)."""
    services = compose()["services"]
    return {
        name: svc
        for name, svc in services.items()
        if str(svc.get("image", "")).startswith("pgcdc:")
    }


def mounts_of(volumes: list[str]) -> dict[str, str]:
    """Compose volume entries (`source:target[:mode]`) as source -> target."""
    result = {}
    for entry in volumes:
        source, target = entry.split(":")[:2]
        result[source] = target
    return result


def search(pattern: str, text: str, flags: int = 0) -> re.Match[str]:
    found = re.search(pattern, text, flags)
    assert found is not None, f"{pattern!r} not found"
    return found


def dockerfile() -> str:
    return DOCKERFILE.read_text()


def project_version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        version: str = tomllib.load(handle)["project"]["version"]
    return version


def key_paths(doc: dict[str, Any]) -> set[str]:
    """Dotted `section.option` paths of a two-level configuration document."""
    return {f"{section}.{key}" for section, values in doc.items() for key in (values or {})}


def settings_fields() -> set[str]:
    """Every `section.option` the Settings model defines, by walking its pydantic fields."""
    fields: set[str] = set()
    for section, info in Settings.model_fields.items():
        model = info.annotation
        assert isinstance(model, type) and issubclass(model, BaseModel), section
        fields.update(f"{section}.{name}" for name in model.model_fields)
    return fields


def env_field(name: str) -> str:
    """`PGCDC_SOURCE__PASSWORD` -> `source.password` (empty string if not of that shape)."""
    match = re.fullmatch(r"PGCDC_([A-Z0-9_]+?)__([A-Z0-9_]+)", name)
    return f"{match[1].lower()}.{match[2].lower()}" if match else ""


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """No PGCDC_* variables from the outside; PGCDC_CONFIG (set by load_settings) restored."""
    for name in list(os.environ):
        if name.startswith("PGCDC_"):
            monkeypatch.delenv(name)
    # Recorded first so that teardown removes what load_settings sets.
    monkeypatch.setenv("PGCDC_CONFIG", "")
    monkeypatch.delenv("PGCDC_CONFIG")
    yield monkeypatch


def load_config_text(text: str, tmp_path: Path) -> Settings:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return load_settings(path)


# --- PromQL ------------------------------------------------------------------------------

PROMQL_FUNCTIONS = {
    "sum",
    "min",
    "max",
    "avg",
    "count",
    "stddev",
    "topk",
    "bottomk",
    "quantile",
    "rate",
    "irate",
    "increase",
    "delta",
    "idelta",
    "deriv",
    "changes",
    "resets",
    "histogram_quantile",
    "abs",
    "clamp_min",
    "clamp_max",
    "absent",
    "vector",
    "scalar",
    "time",
    "timestamp",
    "max_over_time",
    "min_over_time",
    "avg_over_time",
    "label_replace",
    "predict_linear",
}
PROMQL_KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_SELECTOR = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_IDENT = re.compile(r"(?<![A-Za-z0-9_:.$])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?")


_LABEL_VALUES = re.compile(r"\blabel_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,\s*(\w+)\s*\)")


def promql_refs(expr: str) -> tuple[dict[str, set[str]], set[str]]:
    """Metric names of a PromQL expression with the labels their selectors match on, and
    the labels of its grouping clauses. Unknown functions fail the calling test. Grafana's
    `label_values(metric, label)` counts as a selector of `label` on `metric`."""
    metrics: dict[str, set[str]] = {}
    code = _LABEL_VALUES.sub(r'\1{\2=~".+"}', _STRING.sub('""', expr))
    depth: list[str] = []
    for char in code:
        if char in "([{":
            depth.append(")]}"["([{".index(char)])
        elif char in ")]}":
            assert depth and depth.pop() == char, f"unbalanced {char!r} in {expr!r}"
    assert not depth, f"unclosed {''.join(depth)!r} in {expr!r}"
    for name, matchers in _SELECTOR.findall(code):
        metrics.setdefault(name, set()).update(_MATCHER.findall(_STRING.sub("", matchers)))
    grouping = {
        label.strip()
        for _, labels in _GROUPING.findall(code)
        for label in labels.split(",")
        if label.strip()
    }
    bare = _GROUPING.sub(" ", re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", code))
    for name, call in _IDENT.findall(bare):
        if call:
            assert name in PROMQL_FUNCTIONS, f"unknown PromQL function {name} in {expr!r}"
        elif name not in PROMQL_KEYWORDS:
            metrics.setdefault(name, set())
    return metrics, grouping


def exported_series() -> dict[str, set[str]]:
    """Sample name -> label names, as a scrape of a worker's /metrics shows them
    (counters as *_total, histograms as *_bucket/_sum/_count), plus Prometheus' target
    labels and its `up` series."""
    metrics = Metrics("slot1", registry=CollectorRegistry())
    for value in vars(metrics).values():
        collectors = value.values() if isinstance(value, dict) else [value]
        for collector in collectors:
            if isinstance(collector, MetricWrapperBase):
                labelnames = collector._labelnames
                if labelnames:
                    collector.labels(*["x"] * len(labelnames))
    series: dict[str, set[str]] = {
        name: set(labels) for name, labels in PROMETHEUS_BUILTINS.items()
    }
    for family in metrics.registry.collect():
        for sample in family.samples:
            series.setdefault(sample.name, set(TARGET_LABELS)).update(sample.labels)
    return series


def check_exprs(exprs: list[str]) -> set[str]:
    """Assert every metric and label in `exprs` is exported; return the metric names."""
    series = exported_series()
    used: set[str] = set()
    for expr in exprs:
        metrics, grouping = promql_refs(expr)
        assert metrics, f"no metric in {expr!r}"
        for name, labels in metrics.items():
            assert name in series, f"{name} (in {expr!r}) is not exported by Metrics"
            assert labels <= series[name], f"{name} has no label {labels - series[name]}"
        available = set().union(*(series[name] for name in metrics))
        assert grouping <= available, f"grouping by {grouping - available} in {expr!r}"
        used.update(metrics)
    return used


def dashboard() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return doc


def dashboard_exprs() -> list[str]:
    return [t["expr"] for panel in dashboard()["panels"] for t in panel.get("targets", [])]


def rules() -> list[dict[str, Any]]:
    return [rule for group in load_yaml(RULES)["groups"] for rule in group["rules"]]


# --- parsing ----------------------------------------------------------------------------


def test_every_yaml_and_json_under_deploy_parses() -> None:
    """Each *.yml, *.yaml and *.json file under deploy/ parses and is not empty."""
    files = [
        p
        for p in sorted(DEPLOY.rglob("*"))
        if p.suffix in {".yml", ".yaml", ".json"} and p.is_file()
    ]
    assert len(files) >= 12, files
    for path in files:
        if path.suffix == ".json":
            assert json.loads(path.read_text()), path
        else:
            docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
            assert docs, path


def test_promql_reference_extraction() -> None:
    """The PromQL scanner finds metrics, selector labels and grouping labels (and would
    therefore notice a misspelt metric in the dashboard or the rules)."""
    metrics, grouping = promql_refs(
        'histogram_quantile(0.99, sum by (le) (rate(a_bucket{slot=~"$slot"}[$__rate_interval])))'
        " / on (slot) group_left b_total and c"
    )
    assert metrics == {"a_bucket": {"slot"}, "b_total": set(), "c": set()}
    assert grouping == {"le", "slot"}
    assert promql_refs("label_values(pgcdc_lag_bytes, job)") == (
        {"pgcdc_lag_bytes": {"job"}},
        set(),
    )
    with pytest.raises(AssertionError, match="pgcdc_nonexistent"):
        check_exprs(["sum(rate(pgcdc_nonexistent_total[5m]))"])
    with pytest.raises(AssertionError, match="label"):
        check_exprs(['pgcdc_lag_bytes{table="x"}'])
    with pytest.raises(AssertionError, match="unclosed"):
        promql_refs("histogram_quantile(0.5, sum by (le) (rate(a_bucket[5m]))")
    with pytest.raises(AssertionError, match="unknown PromQL function"):
        promql_refs("rates(pgcdc_events_total[5m])")


# --- dashboard ----------------------------------------------------------------------------


def test_dashboard_metrics_are_exported() -> None:
    """Every metric and label the dashboard's PromQL uses is exported by Metrics, and
    every exported pgcdc metric family appears on the dashboard."""
    exprs = dashboard_exprs()
    variables = [v["definition"] for v in dashboard()["templating"]["list"] if v["type"] == "query"]
    used = check_exprs(exprs + variables)
    families = {
        re.sub(r"_(total|created|bucket|sum|count)$", "", name)
        for name in exported_series()
        if name.startswith("pgcdc_")
    }
    shown = {re.sub(r"_(total|bucket|sum|count)$", "", name) for name in used}
    assert families - shown == set(), "metrics missing from the dashboard"


def test_dashboard_shows_slot_stats_as_pg_stat_replication_slots() -> None:
    """The slot-stats mirror appears as a table with the view's eight columns, as a stat
    panel per total, and as rates."""
    panels = dashboard()["panels"]
    table = next(p for p in panels if p["type"] == "table")
    renamed = next(t for t in table["transformations"] if t["id"] == "organize")
    assert sorted(renamed["options"]["renameByName"].values()) == sorted(SLOT_STATS)
    stats = {p["title"]: p for p in panels if p["type"] == "stat"}
    for name in SLOT_STATS:
        assert f"pgcdc_slot_{name}_total" in stats[name]["targets"][0]["expr"]
        assert any(
            f"rate(pgcdc_slot_{name}_total" in t["expr"]
            for p in panels
            if p["type"] == "timeseries"
            for t in p["targets"]
        ), name
    latency = " ".join(dashboard_exprs())
    assert "histogram_quantile(0.5," in latency and "histogram_quantile(0.99," in latency


def test_dashboard_layout_and_datasource() -> None:
    """Panel ids are unique, panels fit the 24-column grid without overlapping, and the
    datasource variable defaults to the provisioned datasource's uid."""
    panels = dashboard()["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        area = {
            (x, y)
            for x in range(pos["x"], pos["x"] + pos["w"])
            for y in range(pos["y"], pos["y"] + pos["h"])
        }
        assert not area & cells, f"{panel['title']} overlaps another panel"
        cells |= area
    provisioned = load_yaml(DEPLOY / "grafana/provisioning/datasources/prometheus.yml")
    (source,) = provisioned["datasources"]
    variable = next(v for v in dashboard()["templating"]["list"] if v["name"] == "datasource")
    assert variable["current"]["value"] == source["uid"]
    for panel in panels:
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]


def test_dashboard_file_is_the_generators_output() -> None:
    """deploy/grafana/pgcdc.json is exactly what gen_dashboard.py writes (no hand edits
    that the next regeneration would lose)."""
    spec = importlib.util.spec_from_file_location(
        "gen_dashboard", DEPLOY / "grafana" / "gen_dashboard.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert DASHBOARD.read_text() == module.render()


def test_grafana_provisioning_points_at_the_dashboard() -> None:
    """The dashboard provider's path is where compose mounts pgcdc.json, and the
    datasource URL is compose's Prometheus service."""
    provider = load_yaml(DEPLOY / "grafana/provisioning/dashboards/pgcdc.yml")["providers"][0]
    grafana = compose()["services"]["grafana"]
    mounts = mounts_of(grafana["volumes"])
    target = mounts["./grafana/pgcdc.json"]
    assert Path(target).parent == Path(provider["options"]["path"])
    assert mounts["./grafana/provisioning"] == "/etc/grafana/provisioning"
    source = load_yaml(DEPLOY / "grafana/provisioning/datasources/prometheus.yml")
    ports = compose()["services"]["prometheus"]["ports"]
    assert source["datasources"][0]["url"] == f"http://prometheus:{ports[0].split(':')[1]}"


# --- alert rules ----------------------------------------------------------------------------


def test_rule_metrics_are_exported() -> None:
    """Every metric and label the alert rules use is exported by Metrics (or is `up`)."""
    check_exprs([rule["expr"] for rule in rules()])


def test_rules_cover_lag_stall_errors_spill_and_down() -> None:
    """There are alerts for lag in bytes and seconds, a stalled slot, Kafka and registry
    errors, spill growth, the state volume, restarts and a down worker (also when its
    target is gone: absent()); each has a severity and a summary."""
    by_metric: dict[str, list[str]] = {}
    names = []
    for rule in rules():
        names.append(rule["alert"])
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]
        for metric in promql_refs(rule["expr"])[0]:
            by_metric.setdefault(metric, []).append(rule["alert"])
    assert len(names) == len(set(names))
    for metric in (
        "pgcdc_lag_bytes",
        "pgcdc_lag_seconds",
        "pgcdc_kafka_errors_total",
        "pgcdc_registry_errors_total",
        "pgcdc_slot_spill_bytes_total",
        "pgcdc_state_volume_free_bytes",
        "pgcdc_start_time_seconds",
    ):
        assert metric in by_metric, f"no alert on {metric}"
    stalled = set(by_metric["pgcdc_confirmed_lsn"]) & set(by_metric["pgcdc_server_wal_lsn"])
    assert stalled, "no alert comparing the confirmed LSN with the server's WAL LSN"
    down = next(r for r in rules() if r["alert"] == "PgcdcWorkerDown")
    assert "absent(pgcdc_start_time_seconds)" in down["expr"]
    assert any(
        re.search(r"\bchanges\(.*\bpgcdc_start_time_seconds\b", r["expr"]) for r in rules()
    ), "no alert on restarts (changes of the start time)"


def test_no_rule_or_panel_depends_on_the_scrape_job() -> None:
    """No alert and no panel reads `up` or a `job` label: Kubernetes annotation discovery
    names the job after its scrape config, so `up{job="pgcdc"}` matched nothing there."""
    variables = [v["definition"] for v in dashboard()["templating"]["list"] if v["type"] == "query"]
    for expr in [r["expr"] for r in rules()] + dashboard_exprs() + variables:
        metrics, grouping = promql_refs(expr)
        assert "up" not in metrics, expr
        assert "job" not in grouping and all("job" not in m for m in metrics.values()), expr


def test_prometheus_scrapes_pgcdc_and_loads_the_rules() -> None:
    """prometheus.yml scrapes pgcdc on the metrics port and loads the rules file compose
    mounts."""
    config = load_yaml(PROMETHEUS)
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "pgcdc"]
    assert job["static_configs"][0]["targets"] == [f"pgcdc:{METRICS_PORT}"]
    assert job.get("metrics_path", "/metrics") == "/metrics"
    mounts = mounts_of(compose()["services"]["prometheus"]["volumes"])
    assert config["rule_files"] == [mounts["./prometheus/rules.yml"]]
    assert mounts["./prometheus/prometheus.yml"] == "/etc/prometheus/prometheus.yml"


# --- configuration ----------------------------------------------------------------------


def test_example_config_covers_every_setting(clean_env: pytest.MonkeyPatch) -> None:
    """config.example.yaml sets every field of every Settings section (walking the
    pydantic models), nothing else, and loads through load_settings to the defaults."""
    example = load_yaml(EXAMPLE)
    assert key_paths(example) == settings_fields()
    assert set(example) == set(Settings.model_fields)
    loaded = load_settings(EXAMPLE)
    assert loaded.model_dump() == Settings().model_dump()


def test_example_config_comments_every_option() -> None:
    """Each option line in config.example.yaml follows a comment that gives its default."""
    lines = EXAMPLE.read_text().splitlines()
    options = 0
    for index, line in enumerate(lines):
        if not re.match(r"^  [a-z_]+:", line):
            continue
        options += 1
        comment = []
        for previous in reversed(lines[:index]):
            if not previous.strip().startswith("#"):
                break
            comment.append(previous)
        assert comment, f"option without a comment: {line.strip()}"
        assert any("Default:" in c for c in comment), f"no default given for {line.strip()}"
    assert options == len(settings_fields())


def test_compose_and_k8s_configs_use_the_same_valid_keys(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The compose config file and the ConfigMap's config set the same keys, a subset of
    config.example.yaml's, hold no secrets, and both load through load_settings."""
    example = key_paths(load_yaml(EXAMPLE))
    compose_config = load_yaml(COMPOSE_CONFIG)
    k8s_config = configmap_config()
    assert key_paths(compose_config) == key_paths(k8s_config)
    assert key_paths(k8s_config) <= example
    secret_fields = {"source.password", "kafka.sasl_password", "registry.basic_auth"}
    assert not key_paths(k8s_config) & secret_fields
    for config, text in (
        (compose_config, COMPOSE_CONFIG.read_text()),
        (k8s_config, yaml.safe_dump(k8s_config)),
    ):
        settings = load_config_text(text, tmp_path)
        assert settings.metrics.port == METRICS_PORT
        assert settings.log.format == "json"  # containers: one JSON object per line
        assert str(settings.decoding.state_dir).startswith("/var/lib/pgcdc/")
        assert config["source"]["user"] == "pgcdc"


def _env_value(entry: dict[str, Any]) -> str:
    """A container env entry's value; from a Secret, a stand-in: a required key holds a
    value, an optional one may be left empty (as in secret.example.yaml), and an empty
    secret counts as unset."""
    if "value" in entry:
        return str(entry["value"])
    return "" if entry["valueFrom"]["secretKeyRef"].get("optional") else "from-a-secret"


def test_env_vars_are_settings_fields(clean_env: pytest.MonkeyPatch) -> None:
    """Every PGCDC_* variable compose and k8s set names a Settings field (or is
    PGCDC_CONFIG), and the settings load with them set."""
    fields = settings_fields()
    env_sets: list[dict[str, str]] = []
    for service in pgcdc_services().values():
        env_sets.append({k: str(v) for k, v in service["environment"].items()})
    for container in pod_containers():
        env_sets.append({e["name"]: _env_value(e) for e in container["env"]})
    assert len(env_sets) == 4  # compose setup + worker, k8s init container + worker
    for env in env_sets:
        assert env.get("PGCDC_CONFIG") == CONFIG_PATH
        assert "PGCDC_SOURCE__PASSWORD" in env
        for name in env:
            assert name.startswith("PGCDC_"), name
            assert name in SPECIAL_ENV or env_field(name) in fields, f"{name} is no setting"
        for name, value in env.items():
            if name not in SPECIAL_ENV:
                clean_env.setenv(name, value.replace("${", "").replace("}", ""))
        assert load_settings().source.password is not None
        for name in env:
            clean_env.delenv(name, raising=False)


# --- compose, k8s and the Dockerfile agree --------------------------------------------------


def test_same_image_everywhere() -> None:
    """Compose and k8s run the same image name:tag, the one the Dockerfile's build line
    names, tagged with the project's version."""
    image = f"pgcdc:{project_version()}"
    assert f"docker build -t {image} ." in dockerfile()
    for name, service in pgcdc_services().items():
        assert service["image"] == image, name
        assert service["build"]["context"] == ".."
        assert (
            COMPOSE.parent / service["build"]["context"] / service["build"]["dockerfile"]
        ).resolve() == DOCKERFILE
    assert set(pgcdc_services()) == {"pgcdc", "pgcdc-setup"}
    for container in pod_containers():
        assert container["image"] == image, container["name"]


def test_same_metrics_port_everywhere() -> None:
    """9187 is the Dockerfile's EXPOSE and HEALTHCHECK port, compose's published port,
    the k8s container port, both probes' port and the Service's target."""
    text = dockerfile()
    assert search(r"^EXPOSE\s+(\d+)\s*$", text, re.M)[1] == str(METRICS_PORT)
    health = search(r"^HEALTHCHECK\b.*?CMD (.*?)$", text, re.M | re.S)
    assert re.findall(r"127\.0\.0\.1:(\d+)/healthz", health[1]) == [str(METRICS_PORT)]
    assert compose()["services"]["pgcdc"]["ports"] == [f"{METRICS_PORT}:{METRICS_PORT}"]
    (worker,) = k8s_kind("Deployment")["spec"]["template"]["spec"]["containers"]
    assert [p["containerPort"] for p in worker["ports"]] == [METRICS_PORT]
    assert worker["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": METRICS_PORT}
    assert worker["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": METRICS_PORT}
    (port,) = k8s_kind("Service")["spec"]["ports"]
    assert port["port"] == METRICS_PORT and port["targetPort"] == worker["ports"][0]["name"]
    annotations = k8s_kind("Service")["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(METRICS_PORT)


def test_same_config_path_and_state_volume() -> None:
    """The config file is mounted where the Dockerfile's CMD reads it, in compose and k8s,
    and the state directory sits on a persistent volume in both."""
    cmd = json.loads(search(r"^CMD\s+(\[.*\])\s*$", dockerfile(), re.M)[1])
    assert cmd == ["run", "--config", CONFIG_PATH]
    state_dir = load_yaml(COMPOSE_CONFIG)["decoding"]["state_dir"]
    assert state_dir == configmap_config()["decoding"]["state_dir"]
    for name, service in pgcdc_services().items():
        assert mounts_of(service["volumes"])["./pgcdc/config.yaml"] == CONFIG_PATH, name
        assert (COMPOSE.parent / "pgcdc" / "config.yaml").is_file()
    volumes = mounts_of(compose()["services"]["pgcdc"]["volumes"])
    assert state_dir.startswith(volumes["pgcdc-state"] + "/")
    assert "pgcdc-state" in compose()["volumes"]
    pod = k8s_kind("Deployment")["spec"]["template"]["spec"]
    claims = {v["name"]: v for v in pod["volumes"]}
    for container in pod_containers():
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        config_volume = claims[mounts[str(Path(CONFIG_PATH).parent)]]
        assert config_volume["configMap"]["name"] == "pgcdc-config"
        assert config_volume["configMap"]["items"] == [
            {"key": "config.yaml", "path": Path(CONFIG_PATH).name}
        ]
        state_volume = next(claims[n] for p, n in mounts.items() if state_dir.startswith(p + "/"))
        claim = state_volume["persistentVolumeClaim"]["claimName"]
        assert k8s_kind("PersistentVolumeClaim", claim)
    worker = pod["containers"][0]
    assert worker["args"] == cmd


def test_k8s_runs_one_non_root_worker() -> None:
    """One replica, Recreate (never two workers on one slot), non-root as the
    Dockerfile's uid and gid (the state volume's fsGroup too), secrets from Secrets:
    the worker's from pgcdc-secrets, the setup init container's superuser credentials
    from pgcdc-setup-secrets, each shaped as secret.example.yaml shows (its optional
    keys left out: present but empty, they would be set to "")."""
    deployment = k8s_kind("Deployment")
    spec = deployment["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}
    uid = int(search(r"useradd\b.*--uid (\d+)", dockerfile())[1])
    search(r"^USER pgcdc\s*$", dockerfile(), re.M)
    security = spec["template"]["spec"]["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["runAsUser"] == uid == 10001
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert k8s_kind("Service")["spec"]["selector"] == spec["selector"]["matchLabels"]
    gid = int(search(r"groupadd\b.*--gid (\d+) pgcdc\b", dockerfile())[1])
    search(r"useradd\b.*--gid pgcdc\b", dockerfile())
    assert security["runAsGroup"] == security["fsGroup"] == gid == 10001
    # Each container's secrets, by Secret: the worker's role and the setup's superuser
    # come from different Secrets, and neither container gets the other's.
    expected = {
        "setup": {
            "pgcdc-setup-secrets": {
                "PGCDC_SOURCE__USER": "source-user",
                "PGCDC_SOURCE__PASSWORD": "source-password",
            }
        },
        "pgcdc": {
            "pgcdc-secrets": {
                "PGCDC_SOURCE__PASSWORD": "source-password",
                "PGCDC_KAFKA__SASL_PASSWORD": "kafka-sasl-password",
                "PGCDC_REGISTRY__BASIC_AUTH": "registry-basic-auth",
            }
        },
    }
    examples = {
        d["metadata"]["name"]: set(d["stringData"])
        for d in yaml.safe_load_all((K8S / "secret.example.yaml").read_text())
    }
    for container in pod_containers():
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        found: dict[str, dict[str, str]] = {}
        for e in container["env"]:
            if "valueFrom" in e:
                ref = e["valueFrom"]["secretKeyRef"]
                found.setdefault(ref["name"], {})[e["name"]] = ref["key"]
        assert found == expected[container["name"]], container["name"]
        for e in container["env"]:
            if "valueFrom" in e:  # the example has every key the pod needs, no other
                ref = e["valueFrom"]["secretKeyRef"]
                assert (ref["key"] in examples[ref["name"]]) is not ref.get("optional", False)
    assert set(examples) == {"pgcdc-secrets", "pgcdc-setup-secrets"}
    kustomization = load_yaml(K8S / "kustomization.yaml")
    assert "secret.example.yaml" not in kustomization["resources"]
    assert all((K8S / r).is_file() for r in kustomization["resources"])


def test_k8s_tls_overlay_mounts_what_its_config_names(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """deploy/k8s/tls: its config sets the base ConfigMap's keys plus TLS ones, all of
    them settings; every file it names is a key of a Secret that both containers mount
    there (mode 0440); the password variables are removed (the files replace them); and
    the config loads, TLS on everywhere, once those files exist."""
    kustomization = load_yaml(K8S_TLS / "kustomization.yaml")
    assert kustomization["resources"] == [".."]
    patches = {}
    for patch in kustomization["patches"]:
        doc = load_yaml(K8S_TLS / patch["path"])
        patches[doc["kind"]] = doc
    text = patches["ConfigMap"]["data"]["config.yaml"]
    config = yaml.safe_load(text)
    assert patches["ConfigMap"]["metadata"]["name"] == "pgcdc-config"
    assert key_paths(configmap_config()) <= key_paths(config) <= settings_fields()
    assert not key_paths(config) & {"source.password", "kafka.sasl_password", "registry.basic_auth"}
    secret_keys = {
        doc["metadata"]["name"]: set(doc["stringData"])
        for path in (K8S / "secret.example.yaml", K8S_TLS / "secret.example.yaml")
        for doc in yaml.safe_load_all(path.read_text())
    }
    pod = patches["Deployment"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v["secret"] for v in pod["volumes"]}
    assert {v["defaultMode"] for v in volumes.values()} == {0o440}
    files = [
        str(value)
        for values in config.values()
        for value in values.values()
        if str(value).startswith("/etc/pgcdc-")
    ]
    assert len(files) == 6  # the CA of each connection, and the three password files
    for container in [*pod["initContainers"], *pod["containers"]]:
        # Each password variable the base container has (setup: only its superuser's).
        deleted = {e["name"] for e in container["env"] if e.get("$patch") == "delete"}
        assert deleted == {
            e["name"]
            for base in pod_containers()
            if base["name"] == container["name"]
            for e in base["env"]
            if "PASSWORD" in e["name"] or "BASIC_AUTH" in e["name"]
        }
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        for path in files:
            directory, name = path.rsplit("/", 1)
            assert name in secret_keys[volumes[mounts[directory]]["secretName"]], path
    # setup stays the superuser of pgcdc-setup-secrets; the worker never mounts it
    (setup,) = pod["initContainers"]
    override = {e["name"]: e.get("value") for e in setup["env"]}["PGCDC_SOURCE__PASSWORD_FILE"]
    directory, name = override.rsplit("/", 1)
    setup_mounts = {m["mountPath"]: m["name"] for m in setup["volumeMounts"]}
    assert volumes[setup_mounts[directory]]["secretName"] == "pgcdc-setup-secrets"
    (worker,) = pod["containers"]
    assert "pgcdc-setup-secrets" not in {
        volumes[m["name"]]["secretName"] for m in worker["volumeMounts"] if m["name"] in volumes
    }
    for path in files:
        local = tmp_path / path.lstrip("/")
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_text("user:password\n" if path.endswith("basic-auth") else "x\n")
    settings = load_config_text(text.replace("/etc/", f"{tmp_path}/etc/"), tmp_path)
    assert settings.source.sslmode == "verify-full"
    assert settings.kafka.protocol == "SASL_SSL"
    assert settings.registry.url.startswith("https://")


def test_compose_services_are_configured_for_cdc() -> None:
    """PostgreSQL runs with wal_level=logical and an init script that creates the
    REPLICATION role the config connects as, whose password the worker gets, while the
    setup alone connects as the superuser with its password; Kafka is a one-node KRaft cluster whose
    transaction log has one replica; the registry is Apicurio 3; compose's endpoints are
    the ones in the pgcdc config."""
    services = compose()["services"]
    assert set(services) >= {"postgres", "kafka", "registry", "pgcdc", "prometheus", "grafana"}
    postgres = services["postgres"]
    assert postgres["image"].startswith("postgres:18")
    assert "wal_level=logical" in postgres["command"]
    assert "/var/lib/postgresql" in mounts_of(postgres["volumes"]).values()
    init = DEPLOY / "postgres" / "init" / "01-pgcdc.sh"
    assert os.access(init, os.X_OK)
    script = init.read_text()
    config = load_yaml(COMPOSE_CONFIG)
    assert postgres["environment"]["PGCDC_DB_USER"] == config["source"]["user"]
    assert 'role="${PGCDC_DB_USER:-pgcdc}"' in script
    assert 'CREATE ROLE :"role" WITH LOGIN REPLICATION' in script
    assert 'echo "$hba replication $role all scram-sha-256"' in script
    assert 'case "${PGCDC_HBA_HOSTSSL:-off}" in' in script and "off) hba=host ;;" in script
    assert postgres["environment"]["POSTGRES_DB"] == config["source"]["dbname"]
    worker_env = services["pgcdc"]["environment"]
    assert postgres["environment"]["PGCDC_DB_PASSWORD"] == worker_env["PGCDC_SOURCE__PASSWORD"]
    # The worker connects as the config's role; only the setup gets the superuser's.
    assert "PGCDC_SOURCE__USER" not in worker_env
    setup_env = services["pgcdc-setup"]["environment"]
    assert setup_env["PGCDC_SOURCE__USER"] == "postgres"  # the image's POSTGRES_USER
    assert setup_env["PGCDC_SOURCE__PASSWORD"] == postgres["environment"]["POSTGRES_PASSWORD"]
    kafka = services["kafka"]
    assert re.fullmatch(r"apache/kafka:4\.\d+\.\d+", kafka["image"])
    env = kafka["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == 1
    assert env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == 1
    assert f"PLAINTEXT://{config['kafka']['bootstrap_servers']}" in env[
        "KAFKA_ADVERTISED_LISTENERS"
    ].split(",")
    registry = services["registry"]
    assert re.fullmatch(r"apicurio/apicurio-registry:3\.\d+\.\d+", registry["image"])
    assert config["registry"]["url"] == "http://registry:8080/apis/ccompat/v7"
    assert config["source"]["host"] == "postgres"
    assert shlex.split(services["pgcdc-setup"]["command"][0])[0] == "setup"
    depends = services["pgcdc"]["depends_on"]
    assert depends["pgcdc-setup"]["condition"] == "service_completed_successfully"
