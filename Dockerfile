# syntax=docker/dockerfile:1
#
# sitemapd container image.
#
#   docker build -t sitemapd .
#   docker run --rm -p 8080:8080 -v sitemapd-data:/data -e SITEMAPD_API_TOKENS=change-me sitemapd
#
# Configuration comes only from the environment (SITEMAPD_*, DATABASE_URL, PGPASSWORD; see config/default.toml)
# and, optionally, a TOML file mounted into the container and named by SITEMAPD_CONFIG:
#   -v ./sitemapd.toml:/etc/sitemapd/sitemapd.toml:ro -e SITEMAPD_CONFIG=/etc/sitemapd/sitemapd.toml
# (SITEMAPD_CONFIG rather than --config, so that the HEALTHCHECK's `sitemapd healthcheck` reads the same file.)
# Environment variables override the file; SITEMAPD_BIND is set below.
#
# The server refuses to listen on 0.0.0.0 without API tokens (the write API would be open to anyone), so
# SITEMAPD_API_TOKENS must be given at run time; it is deliberately not set here. Without DATABASE_URL the data
# lives in the SQLite file /data/sitemapd.db, on the volume /data.
#
# On SIGTERM, sitemapd lets requests in flight finish for SITEMAPD_SHUTDOWN_GRACE (25s), then exits 0.
# `docker stop` waits only 10 s before SIGKILL: use `docker stop -t 30` or `docker run --stop-timeout 30`.

# cargo-chef: compile the dependencies in their own layer, rebuilt only when Cargo.toml/Cargo.lock change.
FROM lukemathwalker/cargo-chef:0.1.77-rust-1.95.0-slim-bookworm AS chef
WORKDIR /app

# Reduce the workspace to a recipe (manifests and lock file only).
FROM chef AS planner
COPY . .
RUN cargo chef prepare --recipe-path recipe.json

# Build the dependencies from the recipe (cached), then the binary.
FROM chef AS builder
# make: the allocator, jemalloc, is built from source (tikv-jemalloc-sys); the slim image has gcc but not make.
# Not pinned to a version: Debian replaces a package's version in place (a point release or a security update),
# so a pin breaks the build on the day it moves; the base image's tag already fixes the release (bookworm).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends make \
    && rm -rf /var/lib/apt/lists/*
COPY --from=planner /app/recipe.json recipe.json
# The recipe has no skeleton of a crate patched in by path ([patch.crates-io] in Cargo.toml): it is built whole.
COPY vendor/ vendor/
RUN cargo chef cook --release --locked --recipe-path recipe.json
COPY . .
RUN cargo build --release --locked --bin sitemapd

# Runtime: Debian slim, matching the builder's glibc (bookworm). No packages are added: TLS to Postgres uses the
# root certificates compiled into the binary (webpki-roots), and the health check is the binary itself.
FROM debian:bookworm-slim AS runtime
RUN groupadd --system --gid 10001 sitemapd \
    && useradd --system --uid 10001 --gid 10001 --home-dir /data --no-create-home --shell /usr/sbin/nologin sitemapd \
    && install -d -o 10001 -g 10001 -m 0750 /data
COPY --from=builder /app/target/release/sitemapd /usr/local/bin/sitemapd

# Non-root, numeric so that orchestrators can check runAsNonRoot. /data is the working directory, where the
# default SQLite database (sitemapd.db) is created; a new volume on it starts out owned by 10001.
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]

ENV SITEMAPD_BIND=0.0.0.0:8080
EXPOSE 8080

# Liveness only (/healthz does not touch the database; /readyz does). It reaches the port of SITEMAPD_BIND on
# 127.0.0.1 and exits 0 on a 200 within 3 seconds.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/sitemapd", "healthcheck"]

ENTRYPOINT ["/usr/local/bin/sitemapd"]
CMD ["serve"]
