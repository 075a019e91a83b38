# syntax=docker/dockerfile:1
# orca: a multi-stage build. The builder compiles the release binary (pg_query generates its
# bindings with libclang; protoc must not be installed). The runtime image holds that binary,
# CA certificates and nothing else a deployment does not need: orca links only glibc, libm and
# libgcc_s (sqlx speaks the PostgreSQL protocol itself, so no libpq), and reaches a shared
# PostgreSQL through ORCA_DATABASE_URL and DATABASE_URL, so no PostgreSQL server is installed.
# Build: docker build -t orca .   Run: see deploy/kubernetes/ and README "Scaled-out deployment".

FROM rust:1.95-bookworm AS builder
# Debian's stable packages are not pinned: a pinned version disappears from the mirror at its
# next security update and breaks the build; bookworm itself is the pin.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends libclang-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The registry and the target directory are cache mounts: a rebuild compiles what changed.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p orca --bin orca \
    && strip target/release/orca \
    && cp target/release/orca /usr/local/bin/orca

FROM debian:bookworm-slim AS runtime
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 orca \
    && useradd --system --uid 10001 --gid orca --home-dir /var/lib/orca --shell /usr/sbin/nologin orca \
    && mkdir -p /var/lib/orca /etc/orca \
    && chown orca:orca /var/lib/orca
COPY --from=builder /usr/local/bin/orca /usr/local/bin/orca
USER 10001:10001
WORKDIR /var/lib/orca
ENV ORCA_HOME=/var/lib/orca \
    ORCA_LOG=orca=info,warn
EXPOSE 8080
# Every replica needs ORCA_DATABASE_URL (and DATABASE_URL), the same ORCA_SECRET, and
# auth.api_keys in the orca.yaml that ORCA_CONFIG names (a non-loopback bind refuses to serve
# anonymous callers).
ENTRYPOINT ["/usr/local/bin/orca"]
CMD ["serve", "--http", "0.0.0.0:8080"]
