# syntax=docker/dockerfile:1

# ---- build -------------------------------------------------------------------
FROM rust:1-bookworm AS builder
WORKDIR /build

# Dependencies first, in a layer of their own: it is rebuilt only when a
# manifest or the lock file changes, not on every source edit. Cargo reads
# every workspace member's manifest, so each gets placeholder targets; the
# image builds and ships only the server, and the load generator
# (crates/pitboss-bots) keeps its placeholder.
COPY Cargo.toml Cargo.lock ./
COPY crates/pitboss-bots/Cargo.toml crates/pitboss-bots/
COPY scripts/docker-stub-targets.sh /usr/local/bin/docker-stub-targets
RUN set -eux; \
    sh /usr/local/bin/docker-stub-targets Cargo.toml crates/pitboss-bots/Cargo.toml; \
    cargo build --profile dist --locked -p pitboss --bin pitboss; \
    rm -rf src

COPY src ./src
COPY migrations ./migrations
COPY config ./config
COPY static ./static
# The copied sources can be older than the placeholder build above; a fresh
# mtime makes cargo rebuild the crate instead of shipping the placeholder.
RUN set -eux; \
    find src -name '*.rs' -exec touch {} +; \
    cargo build --profile dist --locked -p pitboss --bin pitboss; \
    cp target/dist/pitboss /usr/local/bin/pitboss

# ---- run ---------------------------------------------------------------------
FROM debian:bookworm-slim

RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends ca-certificates curl; \
    rm -rf /var/lib/apt/lists/*; \
    useradd --system --user-group --uid 10001 --home-dir /app --no-create-home \
        --shell /usr/sbin/nologin pitboss

COPY --from=builder /usr/local/bin/pitboss /usr/local/bin/pitboss
COPY --chown=root:root config /app/config

WORKDIR /app
ENV PITBOSS_ENV=production \
    PITBOSS__HTTP__HOST=0.0.0.0
USER pitboss
EXPOSE 8080

# pitboss drains on SIGTERM (up to PITBOSS__SHUTDOWN__DRAIN_TIMEOUT_MS, 30 s by
# default): give it longer than that before the runtime's SIGKILL
# (`docker stop -t 45`, compose `stop_grace_period: 45s`).
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD curl -fsS http://127.0.0.1:8080/healthz || exit 1

ENTRYPOINT ["pitboss"]
CMD ["serve"]
