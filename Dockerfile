# pgcdc worker image. Build: docker build -t pgcdc:0.1.0 .
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY service ./service
COPY connectors ./connectors
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim-bookworm
ENV PYTHONUNBUFFERED=1 \
    PGCDC_DECODING__STATE_DIR=/var/lib/pgcdc/state \
    PGCDC_SCHEMAS_DIR=/opt/pgcdc/schemas
COPY --from=build /install /usr/local
COPY schemas /opt/pgcdc/schemas
RUN useradd --system --uid 10001 --home-dir /var/lib/pgcdc --create-home pgcdc
USER pgcdc
WORKDIR /var/lib/pgcdc
EXPOSE 9187
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:9187/healthz', timeout=2).status == 200 else 1)"]
ENTRYPOINT ["pgcdc"]
CMD ["run", "--config", "/etc/pgcdc/config.yaml"]
