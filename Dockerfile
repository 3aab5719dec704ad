# pgcdc worker image. Build: docker build -t pgcdc:0.1.0 .
# Stage 1 takes a Rust toolchain from the official image; stage 2 builds the wheel with
# maturin (the native core, service/native, compiled against crates.io), stage 3 runs it.
# Stage 3 holds nothing of the checkout but the installed wheel: tests/deploy/test_topology.py
# runs the compose and k8s commands from a tree laid out as that wheel, with this ENV,
# ENTRYPOINT and CMD, and checks that these steps are still the ones it emulates.
FROM rust:1.95-slim-bookworm AS rust

FROM python:3.11-slim-bookworm AS build
COPY --from=rust /usr/local/cargo /usr/local/cargo
COPY --from=rust /usr/local/rustup /usr/local/rustup
ENV CARGO_HOME=/usr/local/cargo RUSTUP_HOME=/usr/local/rustup PATH=/usr/local/cargo/bin:$PATH
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY service ./service
COPY connectors ./connectors
RUN pip install --no-cache-dir "maturin>=1.9,<2" \
    && maturin build --release --out /wheels \
    && pip install --no-cache-dir --prefix=/install /wheels/*.whl

FROM python:3.11-slim-bookworm
ENV PYTHONUNBUFFERED=1 \
    PGCDC_IMPL=native \
    PGCDC_DECODING__STATE_DIR=/var/lib/pgcdc/state
# The wheel carries everything pgcdc reads at run time (the Avro schemas included).
COPY --from=build /install /usr/local
RUN groupadd --system --gid 10001 pgcdc \
    && useradd --system --uid 10001 --gid pgcdc --home-dir /var/lib/pgcdc --create-home pgcdc
USER pgcdc
WORKDIR /var/lib/pgcdc
EXPOSE 9187
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:9187/healthz', timeout=2).status == 200 else 1)"]
ENTRYPOINT ["pgcdc"]
CMD ["run", "--config", "/etc/pgcdc/config.yaml"]
