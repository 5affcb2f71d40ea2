# syntax=docker/dockerfile:1
#
# sitemapd container image (first draft).
#
#   docker build -t sitemapd .
#   docker run --rm -p 8080:8080 -e SITEMAPD_API_TOKENS=change-me sitemapd
#
# The server refuses to listen on 0.0.0.0 without API tokens (the write API would be open to anyone), so
# SITEMAPD_API_TOKENS must be given at run time; it is deliberately not set here. Without DATABASE_URL the data
# lives in the SQLite file /data/sitemapd.db: mount a volume on /data to keep it. All settings come from the
# environment (SITEMAPD_*, DATABASE_URL; see config/default.toml) or from a file mounted into the container and
# named with --config, e.g. `-v ./sitemapd.toml:/etc/sitemapd.toml:ro ... sitemapd --config /etc/sitemapd.toml serve`.

# cargo-chef: compile the dependencies in their own layer, rebuilt only when Cargo.toml/Cargo.lock change.
FROM lukemathwalker/cargo-chef:0.1.77-rust-1.95.0-slim-bookworm AS chef
WORKDIR /app

# Reduce the workspace to a recipe (manifests and lock file only).
FROM chef AS planner
COPY . .
RUN cargo chef prepare --recipe-path recipe.json

# Build the dependencies from the recipe (cached), then the binary.
FROM chef AS builder
COPY --from=planner /app/recipe.json recipe.json
RUN cargo chef cook --release --locked --recipe-path recipe.json
COPY . .
RUN cargo build --release --locked --bin sitemapd

# Runtime: Debian slim, matching the builder's glibc (bookworm).
FROM debian:bookworm-slim AS runtime
# ca-certificates: TLS to a remote Postgres. curl: the HEALTHCHECK below (the image has no other HTTP client).
# Versions are not pinned (DL3008): bookworm's security updates replace old versions in the archive, so a pinned
# version would stop building; the release (bookworm) is pinned by the base image tag instead.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 sitemapd \
    && useradd --system --uid 10001 --gid 10001 --home-dir /data --no-create-home --shell /usr/sbin/nologin sitemapd \
    && install -d -o 10001 -g 10001 -m 0750 /data
COPY --from=builder /app/target/release/sitemapd /usr/local/bin/sitemapd

# Non-root, numeric so that orchestrators can check runAsNonRoot. /data is the working directory, where the
# default SQLite database (sitemapd.db) is created.
USER 10001:10001
WORKDIR /data

ENV SITEMAPD_BIND=0.0.0.0:8080
EXPOSE 8080

# Liveness only (/healthz does not touch the database; /readyz does). The port follows SITEMAPD_BIND.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["sh", "-c", "curl -fsS --max-time 4 -o /dev/null \"http://127.0.0.1:${SITEMAPD_BIND##*:}/healthz\""]

ENTRYPOINT ["/usr/local/bin/sitemapd"]
CMD ["serve"]
