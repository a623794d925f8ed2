# syntax=docker/dockerfile:1
# Multi-stage build: a cached dependency layer, then the project; the runtime
# image is Debian slim with a non-root user and the data dir as a volume.

FROM rust:1-bookworm AS build
WORKDIR /src
# Dependencies first, so that source edits do not rebuild them. The manifest
# names the benches, so their sources come with it (cargo refuses a manifest
# whose targets are missing; they are not built).
COPY Cargo.toml Cargo.lock ./
COPY benches ./benches
# The workspace's pure core crate: its manifest now, its sources below.
COPY crates/projector-core/Cargo.toml ./crates/projector-core/Cargo.toml
RUN mkdir -p src config crates/projector-core/src && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs crates/projector-core/src/lib.rs config/default.toml \
    && cargo build --release --locked \
    && rm -rf src crates/projector-core/src
COPY config ./config
# The viewer page and the JavaScript client's modules (served at /client/)
# are compiled into the binary (include_str!).
COPY assets ./assets
COPY clients/js/src ./clients/js/src
COPY crates ./crates
COPY src ./src
RUN touch src/main.rs src/lib.rs crates/projector-core/src/lib.rs && cargo build --release --locked

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --user-group --home-dir /nonexistent --shell /usr/sbin/nologin projector \
    && mkdir -p /data && chown projector:projector /data
COPY --from=build /src/target/release/agent-projector /usr/local/bin/agent-projector
USER projector
# Listening on all interfaces needs authentication: set PROJECTOR_AUTH__MODE=jwt
# with a key (see docs/SECURITY.md), or run with --insecure-no-auth on a trusted
# network; without either the server refuses to start and says why.
ENV PROJECTOR_LISTEN=0.0.0.0:8080 \
    PROJECTOR_STORE=embedded \
    PROJECTOR_DATA_DIR=/data \
    PROJECTOR_LOG__FORMAT=json
VOLUME ["/data"]
EXPOSE 8080
# The binary probes its own /readyz: no curl in the image.
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s --retries=3 \
    CMD ["agent-projector", "healthcheck", "--addr", "127.0.0.1:8080"]
ENTRYPOINT ["agent-projector"]
