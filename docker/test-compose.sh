#!/usr/bin/env bash
# docker/test-compose.sh: the compose deployment end to end, against a real Docker engine.
#
#   export DOCKER_HOST=unix:///tmp/hinge-dockerd/docker.sock    # e.g. the engine of docker-here.sh
#   docker/test-compose.sh
#
# Builds the images (host network), starts docker/compose.yaml with docker/compose.multihost.yaml (Redis and
# S3 published with a password and a secret) as its own project (hinge-test, on free ports, so a deployment of
# yours is never touched), then checks, one line per step with its time: start-up time to healthy and ready
# with 4 workers (no container ever `unhealthy`), a 5th worker, hingectl inside the image, uploads, every
# solver, a distributed search spread over workers, predict, a worker stopped mid-job (the shutdown policy's
# outcome), a worker SIGKILLed mid-job (retried elsewhere), Redis restarted mid-job (nothing lost), the 507
# storage_full guard, a data set larger than Redis's maxmemory (uploaded, trained by ocas and dcd, predicted),
# the S3 server stopped mid-upload (503, nothing half-stored, the next upload works), stopped while jobs run
# and wait (they succeed once it is back), restarted (nothing lost), a corrupted cached shard (found by its
# checksum, fetched again), a worker with an empty cache, workers of docker/compose.workers.yaml as on
# another machine (reaching Redis and S3 only through the published addresses; jobs run on both "hosts"),
# down then up (data kept, an old model predicts the same). Exits 0 only when every step held; always
# removes the projects (down -v) unless HINGE_TEST_KEEP=1.
#
# Environment (all optional):
#   HINGE_TEST_PROJECT   compose project name (hinge-test)
#   HINGE_TEST_IMAGE     image tag built and run (hinge:test); HINGE_TEST_S3_IMAGE the S3 server's (hinge-seaweedfs:test)
#   HINGE_TEST_PORT      host port of the API on 127.0.0.1 (a free one)
#   HINGE_TEST_STARTUP_BAR_S  most seconds from `up` to 4 healthy, ready workers (60)
#   HINGE_TEST_SCALE_BAR_S    most seconds from `--scale worker=5` to the 5th worker ready (15)
#   HINGE_TEST_SKIP_BUILD=1   use the image as it is
#   HINGE_TEST_LARGE_REPEATS  the larger-than-Redis data set: 10,000 rows of 34 non-zeros repeated this many times
#                             (100: 34 million non-zeros, 288 MB of arrays; 295: 10^8)
#   HINGE_TEST_COLD=1         also start a worker without the image's kernels: it compiles them all (about
#                             2 minutes on 2 cores) and must take jobs early and stay healthy throughout
#   HINGE_SHUTDOWN_POLICY     the workers' policy under test (requeue, the compose default; or checkpoint)
#   HINGE_TEST_KEEP=1         leave the deployment running at the end (for a look after a failure)
#   COMPOSE              the compose command (default: `docker compose` if it works, else docker-compose)
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
COMPOSE_FILE=$ROOT/docker/compose.yaml
COMPOSE_FILES="-f $COMPOSE_FILE -f $ROOT/docker/compose.multihost.yaml"
PROJECT=${HINGE_TEST_PROJECT:-hinge-test}
REMOTE_PROJECT=${PROJECT}-remote
IMAGE=${HINGE_TEST_IMAGE:-hinge:test}
S3_IMAGE=${HINGE_TEST_S3_IMAGE:-hinge-seaweedfs:test}
STARTUP_BAR_S=${HINGE_TEST_STARTUP_BAR_S:-60}
LARGE_REPEATS=${HINGE_TEST_LARGE_REPEATS:-100}
SCALE_BAR_S=${HINGE_TEST_SCALE_BAR_S:-15}
REDIS_MAXMEMORY=256mb
REDIS_MAXMEMORY_BYTES=268435456
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hinge-compose-test.XXXXXX")
POLLER_PID=
ENGINE_OK=
SCRIPT_T0=$(date +%s.%N)

if [ -z "${COMPOSE:-}" ]; then
  if docker compose version >/dev/null 2>&1; then COMPOSE="docker compose"; else COMPOSE=docker-compose; fi
fi
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=${HINGE_TEST_PORT:-$(free_port)}
BASE=http://127.0.0.1:$PORT
# Redis and S3 are published on the address of the engine's bridge (docker0): the host reaches it, and so do the
# containers of another project, as another machine would reach the main host's private address.
PUBLISH_BIND=$(ip -4 -o addr show docker0 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -1)
PUBLISH_BIND=${PUBLISH_BIND:-127.0.0.1}
REDIS_PORT=$(free_port)
S3_PORT=$(free_port)
SECRET() { python3 -c 'import secrets; print(secrets.token_hex(12))'; }

# Everything the compose file reads, set here so that neither the shell nor docker/.env changes the test.
export COMPOSE_PROJECT_NAME=$PROJECT HINGE_IMAGE=$IMAGE HINGE_S3_IMAGE=$S3_IMAGE HINGE_BIND=127.0.0.1 HINGE_PORT=$PORT \
  HINGE_REDIS_MAXMEMORY=$REDIS_MAXMEMORY HINGE_WORKER_CORES=1 HINGE_SHUTDOWN_POLICY=${HINGE_SHUTDOWN_POLICY:-requeue} \
  HINGE_PUBLISH_BIND=$PUBLISH_BIND HINGE_REDIS_PORT=$REDIS_PORT HINGE_S3_PORT=$S3_PORT \
  HINGE_REDIS_PASSWORD=$(SECRET) HINGE_S3_SECRET_ACCESS_KEY=$(SECRET) HINGE_S3_ACCESS_KEY_ID=hinge-test HINGE_S3_BUCKET=hinge
unset HINGE_API_KEYS HINGE_MODEL_OBJECT_BYTES HINGE_WORKER_CACHE_BYTES

# -- output ------------------------------------------------------------------------------------------

STEP=setup
STEP_T0=$SCRIPT_T0
elapsed() { python3 -c 'import sys; print(f"{float(sys.argv[2]) - float(sys.argv[1]):.1f}")' "$1" "$(date +%s.%N)"; }
step() { STEP=$1; STEP_T0=$(date +%s.%N); }
ok() { printf '%-28s ok  %6ss  %s\n' "$STEP" "$(elapsed "$STEP_T0")" "${1:-}"; }
note() { printf '%-28s     %6s   %s\n' "" "" "$*"; }
# fail MESSAGE: the step's FAIL line (on stderr: fail may run inside $(...), whose stdout is captured), then
# the containers' state and last log lines once, then exit (a subshell's exit fails the assignment that
# ran it, and set -e ends the script there).
fail() {
  printf '%-28s FAIL %5ss  %s\n' "$STEP" "$(elapsed "$STEP_T0")" "$*" >&2
  if [ ! -e "$WORK/failed" ]; then
    : >"$WORK/failed"
    diagnostics >&2 || true
  fi
  exit 1
}
diagnostics() {
  [ -n "$ENGINE_OK" ] || return 0
  echo "--- containers of $PROJECT and $REMOTE_PROJECT"
  docker ps -a --filter "label=com.docker.compose.project=$PROJECT" --format '{{.Names}}\t{{.Status}}'
  docker ps -a --filter "label=com.docker.compose.project=$REMOTE_PROJECT" --format '{{.Names}}\t{{.Status}}'
  local id
  for id in $(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT") \
    $(docker ps -aq --filter "label=com.docker.compose.project=$REMOTE_PROJECT"); do
    echo "--- last log lines of $(docker inspect -f '{{.Name}}' "$id")"
    docker logs --tail 15 "$id" 2>&1 | cut -c1-300
  done
}

cleanup() {
  local rc=$?
  set +e
  trap - ERR
  if [ -n "$POLLER_PID" ]; then kill "$POLLER_PID" 2>/dev/null; wait "$POLLER_PID" 2>/dev/null; fi
  if [ -z "$ENGINE_OK" ]; then
    :  # no engine answered: nothing was started, nothing to remove
  elif [ "${HINGE_TEST_KEEP:-0}" = 1 ]; then
    echo "kept: $COMPOSE $COMPOSE_FILES -p $PROJECT down -v   (API on $BASE)"
  else
    # a step that failed with workers paused leaves them so: `down` cannot stop a paused container
    for project in "$PROJECT" "$REMOTE_PROJECT"; do
      docker ps -q --filter status=paused --filter "label=com.docker.compose.project=$project" | xargs -r docker unpause >/dev/null
    done
    remote down -v --remove-orphans -t 10 >"$WORK/down-remote.log" 2>&1 \
      || { echo "cleanup: down -v of $REMOTE_PROJECT failed:"; cat "$WORK/down-remote.log"; }
    # shellcheck disable=SC2086
    $COMPOSE $COMPOSE_FILES -p "$PROJECT" down -v --remove-orphans -t 10 >"$WORK/down.log" 2>&1 \
      || { echo "cleanup: down -v failed:"; cat "$WORK/down.log"; }
  fi
  rm -rf "$WORK"
  printf '%-28s %s  %6ss\n' "total" "$([ $rc = 0 ] && echo "ok  " || echo FAIL)" "$(elapsed "$SCRIPT_T0")"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# A command that fails outside fail() (set -e ends the script) still names the step and the command.
on_err() { [ -e "$WORK/failed" ] || fail "unexpected failure at line $1: $2"; exit 1; }
trap 'on_err $LINENO "$BASH_COMMAND"' ERR

# -- helpers -----------------------------------------------------------------------------------------

# shellcheck disable=SC2086
dc() { $COMPOSE $COMPOSE_FILES -p "$PROJECT" "$@"; }
# remote ...: the workers of docker/compose.workers.yaml, a project of their own, reaching Redis and S3 only through
# the addresses the main project publishes.
remote() {
  HINGE_REDIS_URL="redis://:$HINGE_REDIS_PASSWORD@$PUBLISH_BIND:$REDIS_PORT/0" HINGE_S3_ENDPOINT_URL="http://$PUBLISH_BIND:$S3_PORT" \
    $COMPOSE -f "$ROOT/docker/compose.workers.yaml" -p "$REMOTE_PROJECT" "$@"
}
# json EXPR: evaluate a Python expression over the JSON document on stdin, bound to `d`.
json() {
  python3 -c '
import json, sys
text = sys.stdin.read()
try:
    d = json.loads(text)
except ValueError:
    sys.exit(f"not JSON: {text[:200]!r}")
r = eval(sys.argv[1])
print(r if not isinstance(r, (dict, list, bool)) else json.dumps(r))' "$1"
}
# api METHOD PATH [curl args...]: the body on stdout; the HTTP status in $WORK/status. Never fails itself.
api() {
  local method=$1 path=$2
  shift 2
  curl -sS -m 30 -o "$WORK/body" -w '%{http_code}' -X "$method" "$@" "$BASE$path" >"$WORK/status" 2>"$WORK/curl.err" \
    || echo 000 >"$WORK/status"
  cat "$WORK/body" 2>/dev/null || true
}
status() { cat "$WORK/status"; }
# must METHOD PATH [args]: api, failing the step unless the status is 2xx.
must() {
  local out
  out=$(api "$@")
  case $(status) in 2??) printf '%s' "$out" ;; *) fail "$1 $2: HTTP $(status): $(printf '%s' "$out" | head -c 400) $(cat "$WORK/curl.err")" ;; esac
}
post_json() { must POST "$1" -H 'Content-Type: application/json' -d "$2"; }
# wait_for SECONDS WHAT COMMAND...: run COMMAND every 0.5 s until it succeeds; fail the step after SECONDS.
wait_for() {
  local limit=$1 what=$2 end
  shift 2
  end=$(($(date +%s) + limit))
  until "$@"; do
    [ "$(date +%s)" -lt "$end" ] || fail "timed out after ${limit}s waiting for $what"
    sleep 0.5
  done
}
# the running containers of a service (not the one-off containers of `compose run`, which carry the same labels)
service_ids() {
  docker ps -q --filter "label=com.docker.compose.project=$PROJECT" --filter "label=com.docker.compose.service=$1" \
    --filter "label=com.docker.compose.oneoff=False"
}
redis_id() { service_ids redis | head -1; }
api_id() { service_ids api | head -1; }
# redis-cli in the Redis container (the password from its REDISCLI_AUTH)
rcli() { docker exec "$(redis_id)" redis-cli --no-auth-warning "$@"; }
# the S3 server's container, running or stopped
s3_id() { docker ps -aq --filter "label=com.docker.compose.project=$PROJECT" --filter "label=com.docker.compose.service=s3" | head -1; }
# The worker container whose hostname starts the worker id `<host>.<pid>.<suffix>`.
container_of_worker() {
  local host=${1%%.*} id
  for id in $(service_ids worker); do
    [ "$(docker inspect -f '{{.Config.Hostname}}' "$id")" = "$host" ] && { echo "$id"; return 0; }
  done
  return 1
}
ready_workers() { curl -s -m 5 "$BASE/readyz" | python3 -c 'import json, sys; print(json.load(sys.stdin).get("workers", 0))' 2>/dev/null || echo 0; }
# all_healthy N: redis, api and N workers are running and healthy, and /readyz counts N ready workers.
all_healthy() {
  local want=$1 ids states
  ids=$(docker ps -q --filter "label=com.docker.compose.project=$PROJECT")
  [ -n "$ids" ] || return 1
  # shellcheck disable=SC2086
  states=$(docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}} {{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}' $ids)
  [ "$(grep -c '^redis running healthy$' <<<"$states")" = 1 ] || return 1
  [ "$(grep -c '^s3 running healthy$' <<<"$states")" = 1 ] || return 1
  [ "$(grep -c '^api running healthy$' <<<"$states")" = 1 ] || return 1
  [ "$(grep -c '^worker running healthy$' <<<"$states")" = "$want" ] || return 1
  [ "$(ready_workers)" = "$want" ]
}
job_done() { case $(api GET "/v1/jobs/$1" | json "d.get('status')" 2>/dev/null) in succeeded | failed | canceled) return 0 ;; *) return 1 ;; esac; }
job_running() { [ "$(api GET "/v1/jobs/$1" | json "d.get('status')" 2>/dev/null)" = running ]; }
# expect_model JOB: the job succeeded and its model exists; prints the model id.
expect_model() {
  local job=$1 body st model
  body=$(must GET "/v1/jobs/$job")
  st=$(json "d['status']" <<<"$body")
  [ "$st" = succeeded ] || fail "job $job ($(json "d['solver']" <<<"$body")) ended $st: $(json "d.get('error')" <<<"$body")"
  model=$(json "d.get('model_id') or ''" <<<"$body")
  [ -n "$model" ] || fail "job $job succeeded without a model"
  must GET "/v1/models/$model" >/dev/null
  echo "$model"
}
submit() { post_json /v1/jobs "{\"dataset_id\": \"$1\", \"solver\": \"$2\", \"params\": $3}" | json "d['id']"; }
metric() { curl -s -m 10 "$BASE/metrics" | awk -v name="$1" '$1 == name {v = $2} END {print v + 0}'; }
worker_of() { rcli HGET "hinge:job:$1" worker; }
# long_job DATASET: a kernel SVM that cannot converge before its deadline (20000 rows with random labels,
# a kernel matrix 16 times the row cache), so it is surely running when the worker is stopped, killed,
# or Redis restarted, and then ends at its deadline, 12 s after it (re)started.
long_job() {
  submit "$1" smo '{"C": 100, "kernel": {"type": "rbf", "gamma": 0.05}, "tol": 1e-06, "max_seconds": 12, "retries": 2}'
}
# running_on JOB: wait until the job has run for 2 s; prints the container running it.
running_on() {
  local job=$1 worker
  wait_for 60 "job $job to run" job_running "$job"
  sleep 2
  job_running "$job" || fail "job $job ended within 2 s of its start: the long job is not long enough here"
  worker=$(worker_of "$job")
  [ -n "$worker" ] || fail "job $job runs but its record names no worker"
  container_of_worker "$worker" || fail "no container for worker $worker"
}
# pause_workers ID...: freeze these workers (to send a job elsewhere), then wait until none of them can still be
# blocked in Redis's BLPOP (an idle worker waits there for at most HINGE_DEQUEUE_POLL_S, 1 s): Redis would hand a
# new job to the frozen process. unpause_workers: thaw them, wait until they are healthy again, and forget that
# they were `unhealthy` while frozen (a frozen worker's heartbeat stops: that is the check doing its job).
PAUSED=
pause_workers() {
  PAUSED="$*"
  docker pause "$@" >/dev/null
  sleep 2
}
unpause_workers() {
  local id names
  # shellcheck disable=SC2086
  docker unpause $PAUSED >/dev/null
  healthy_ids() { for id in $PAUSED; do [ "$(docker inspect -f '{{.State.Health.Status}}' "$id")" = healthy ] || return 1; done; }
  wait_for 120 "the thawed workers healthy again" healthy_ids
  # shellcheck disable=SC2086
  names=$(docker inspect -f '{{.Name}}' $PAUSED | sed 's#^/##')
  for id in $names; do sed -i "/ $id /d" "$WORK/unhealthy.log" 2>/dev/null || true; done
  PAUSED=
}
# started_at T0: when each container of the project started, in seconds after T0 (epoch seconds).
started_at() {
  # shellcheck disable=SC2046
  docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}} {{.State.StartedAt}}' \
    $(docker ps -q --filter "label=com.docker.compose.project=$PROJECT") | python3 -c '
import sys
from datetime import datetime
t0 = float(sys.argv[1])
seen = {}
for line in sys.stdin:
    service, stamp = line.split()
    stamp = stamp.rstrip("Z")[:26]  # microseconds are enough
    seen.setdefault(service, []).append(datetime.fromisoformat(stamp + "+00:00").timestamp() - t0)
out = []
for service in ("redis", "s3", "api", "worker"):
    times = sorted(seen.get(service, []))
    if times:
        out.append(f"{service} {times[0]:.1f}s" if len(times) == 1 else f"{service}s {times[0]:.1f}-{times[-1]:.1f}s")
print(", ".join(out))' "$1"
}
# latest_start SERVICE T0: seconds from T0 to the start of the service's container that started last.
latest_start() {
  # shellcheck disable=SC2046
  docker inspect -f '{{.State.StartedAt}}' $(service_ids "$1") | python3 -c '
import sys
from datetime import datetime
stamps = [datetime.fromisoformat(line.strip().rstrip("Z")[:26] + "+00:00").timestamp() for line in sys.stdin if line.strip()]
print(f"{max(stamps) - float(sys.argv[1]):.1f}")' "$2"
}
health_poller() {
  # docker ps shows `(unhealthy)` in a container's status while it is; every second, for the whole run.
  while :; do
    docker ps -a --filter "label=com.docker.compose.project=$PROJECT" --format '{{.Names}} {{.Status}}' 2>/dev/null \
      | grep '(unhealthy)' | sed "s/^/$(date +%T) /" >>"$WORK/unhealthy.log" || true
    sleep 1
  done
}
never_unhealthy() {
  [ -s "$WORK/unhealthy.log" ] && fail "containers reported unhealthy: $(sort -u -k2,2 "$WORK/unhealthy.log" | head -5 | tr '\n' ';')"
  return 0
}

# -- 0. preflight ------------------------------------------------------------------------------------

step preflight
for tool in docker curl python3; do command -v "$tool" >/dev/null || fail "$tool is not on PATH"; done
docker info >/dev/null 2>&1 || fail "no Docker engine answers (DOCKER_HOST=${DOCKER_HOST:-unset}); start one, e.g. with shared/tools/docker-here.sh"
ENGINE_OK=1
$COMPOSE version >/dev/null 2>&1 || fail "no compose command ($COMPOSE)"
[ -z "$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT")" ] \
  || fail "project $PROJECT already has containers: $COMPOSE -p $PROJECT down -v first (or set HINGE_TEST_PROJECT)"
[ -z "$(docker ps -aq --filter "label=com.docker.compose.project=$REMOTE_PROJECT")" ] \
  || fail "project $REMOTE_PROJECT already has containers: $COMPOSE -p $REMOTE_PROJECT down -v first"
ok "$($COMPOSE version --short 2>/dev/null || $COMPOSE version | head -1), project $PROJECT, API on $BASE"

# -- 1. build ----------------------------------------------------------------------------------------

step build
if [ "${HINGE_TEST_SKIP_BUILD:-0}" != 1 ]; then
  previous=$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)
  docker build --network host --force-rm -f docker/Dockerfile -t "$IMAGE" . >"$WORK/build.log" 2>&1 \
    || { tail -30 "$WORK/build.log" >&2; fail "docker build failed (last lines above)"; }
  docker build --network host --force-rm -f docker/seaweedfs.Dockerfile -t "$S3_IMAGE" . >"$WORK/build-s3.log" 2>&1 \
    || { tail -30 "$WORK/build-s3.log" >&2; fail "docker build of the S3 server failed (last lines above)"; }
  # The image this tag named before (after a source change): only this script uses the tag, and on vfs
  # every image costs its size several times over.
  if [ -n "$previous" ] && [ "$previous" != "$(docker image inspect -f '{{.Id}}' "$IMAGE")" ]; then
    docker rmi "$previous" >/dev/null 2>&1 || true
  fi
fi
docker image inspect "$IMAGE" >/dev/null 2>&1 || fail "no image $IMAGE"
docker image inspect "$S3_IMAGE" >/dev/null 2>&1 || fail "no image $S3_IMAGE"
ok "$IMAGE, $(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1 / 1e6}'); $S3_IMAGE, $(docker image inspect -f '{{.Size}}' "$S3_IMAGE" | awk '{printf "%.0f MB", $1 / 1e6}')"

# -- 2. up with 4 workers ----------------------------------------------------------------------------

health_poller &
POLLER_PID=$!

step "up --scale worker=4"
dc up -d --no-build --scale worker=4 >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log"; fail "compose up failed"; }
created=$(elapsed "$STEP_T0")
wait_for 600 "redis, api and 4 workers healthy with /readyz at 4 workers" all_healthy 4
startup=$(elapsed "$STEP_T0")
never_unhealthy
last=$(latest_start worker "$STEP_T0")
timeline="up returned after ${created}s; containers started at: $(started_at "$STEP_T0"); ready $(python3 -c 'import sys; print(f"{float(sys.argv[1]) - float(sys.argv[2]):.1f}")' "$startup" "$last")s after the last worker started"
python3 -c 'import sys; sys.exit(float(sys.argv[1]) > float(sys.argv[2]))' "$startup" "$STARTUP_BAR_S" \
  || fail "healthy and ready ${startup}s after up: over the bar of ${STARTUP_BAR_S}s ($timeline)"
ok "all healthy, /readyz 4 workers, ${startup}s after up (bar ${STARTUP_BAR_S}s)"
note "$timeline"

step "project and settings"
names=$(docker ps --filter "label=com.docker.compose.project=$PROJECT" --format '{{.Names}}' | sort | tr '\n' ' ')
grep -Eq "(^| )${PROJECT}[_-]worker[_-]1 " <<<"$names" || fail "containers are not named after the project: $names"
[ "$(rcli CONFIG GET maxmemory | tail -1)" = "$REDIS_MAXMEMORY_BYTES" ] || fail "Redis maxmemory is $(rcli CONFIG GET maxmemory | tail -1), not $REDIS_MAXMEMORY"
[ "$(rcli CONFIG GET maxmemory-policy | tail -1)" = noeviction ] || fail "Redis maxmemory-policy is not noeviction"
seen=$(docker exec "$(api_id)" python -c "import os, redis; from core.storage.capacity import memory; print(memory(redis.Redis.from_url(os.environ['REDIS_URL']))[1])") \
  || fail "capacity.memory() failed in the api container"
[ "$seen" = "$REDIS_MAXMEMORY_BYTES" ] || fail "core/storage/capacity.py sees maxmemory $seen"
binding=$(docker port "$(api_id)" 8000 | head -1)
[ "$binding" = "127.0.0.1:$PORT" ] || fail "the API is published on $binding, not 127.0.0.1:$PORT"
policy=$(docker inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$(service_ids worker | head -1)" | sed -n 's/^HINGE_SHUTDOWN_POLICY=//p')
ok "containers ${names% }; maxmemory $REDIS_MAXMEMORY noeviction (capacity.py agrees); API on $binding; workers: $policy"

step "image"
# In the running API container: hingectl runs, the working directory holds no package, the packages
# imported are the installed ones, and the kernels were compiled at build time.
out=$(docker exec "$(api_id)" sh -c '
  hingectl --help >/dev/null || { echo "hingectl --help failed"; exit 1; }
  for p in service worker hinge_client; do [ ! -e "$p" ] || { echo "$(pwd)/$p exists"; exit 1; }; done
  python -c "import service, worker, hinge_client, sys; files = [m.__file__ for m in (service, worker, hinge_client)]; bad = [f for f in files if \"/site-packages/\" not in f]; print(\"not installed: %s\" % bad if bad else \"ok\"); sys.exit(1 if bad else 0)"
  [ -n "$(find "$HINGE_KERNEL_SEED_DIR" -name "*.nbi" | head -1)" ] || { echo "no kernels in $HINGE_KERNEL_SEED_DIR"; exit 1; }' 2>&1) \
  || fail "image check: $out"
ok "hingectl --help; no source tree in $(docker image inspect -f '{{.Config.WorkingDir}}' "$IMAGE"); packages from site-packages; kernels built in"

# -- 3. a 5th worker ---------------------------------------------------------------------------------

step "scale to 5 workers"
dc up -d --no-build --no-recreate --scale worker=5 >"$WORK/scale.log" 2>&1 || { cat "$WORK/scale.log"; fail "compose up --scale worker=5 failed"; }
ready_count_is() { [ "$(ready_workers)" = "$1" ]; }
wait_for 300 "/readyz to count 5 workers" ready_count_is 5
ready5=$(elapsed "$STEP_T0")
started5=$(latest_start worker "$STEP_T0")
wait_for 120 "the 5th worker healthy" all_healthy 5
healthy5=$(elapsed "$STEP_T0")
python3 -c 'import sys; sys.exit(float(sys.argv[1]) > float(sys.argv[2]))' "$ready5" "$SCALE_BAR_S" \
  || fail "5th worker ready ${ready5}s after up --scale: over the bar of ${SCALE_BAR_S}s"
ok "5th worker ready after ${ready5}s (bar ${SCALE_BAR_S}s), healthy after ${healthy5}s"
note "its container started ${started5}s after up --scale (container creation), was ready $(python3 -c 'import sys; print(f"{float(sys.argv[1]) - float(sys.argv[2]):.1f}")' "$ready5" "$started5")s later"
# shellcheck disable=SC2046
note "memory of the idle workers: $(docker stats --no-stream --format '{{.MemUsage}}' $(service_ids worker) | awk '{print $1}' | tr '\n' ' ')"

# -- 4. data sets ------------------------------------------------------------------------------------

step upload
python3 - "$WORK" <<'EOF'
import random, sys
out = sys.argv[1]
rnd = random.Random(0)
with open(f"{out}/binary.svm", "w") as f:  # 3000 rows, 20 features, nearly separable
    w = [rnd.gauss(0, 1) for _ in range(20)]
    for _ in range(3000):
        x = [rnd.gauss(0, 1) for _ in range(20)]
        y = 1 if sum(a * b for a, b in zip(w, x)) + rnd.gauss(0, 0.5) > 0 else -1
        f.write(f"{y} " + " ".join(f"{j + 1}:{v:.4f}" for j, v in enumerate(x) if abs(v) > 0.3) + "\n")
with open(f"{out}/multi.svm", "w") as f:  # 1500 rows, 3 classes around 3 centres, 8 features
    centres = [[rnd.gauss(0, 2) for _ in range(8)] for _ in range(3)]
    for i in range(1500):
        c = i % 3
        f.write(f"{c + 1} " + " ".join(f"{j + 1}:{m + rnd.gauss(0, 1):.4f}" for j, m in enumerate(centres[c])) + "\n")
with open(f"{out}/noise.svm", "w") as f:  # 20000 rows with random labels: a kernel SVM works long on them
    for _ in range(20000):
        f.write(f"{rnd.choice((-1, 1))} " + " ".join(f"{j + 1}:{rnd.gauss(0, 1):.4f}" for j in range(10)) + "\n")
with open(f"{out}/big.svm", "w") as f:  # about 4 MB of text, for the storage_full check
    for _ in range(12000):
        f.write(f"{rnd.choice((-1, 1))} " + " ".join(f"{j + 1}:{rnd.random():.6f}" for j in range(30)) + "\n")
EOF
upload() { must POST "/v1/datasets?name=$2" -F "file=@$WORK/$1" | json "d['id']"; }
DS_BIN=$(upload binary.svm binary)
DS_MULTI=$(upload multi.svm multi)
DS_NOISE=$(upload noise.svm noise)
[ "$(must GET "/v1/datasets/$DS_MULTI" | json "len(d['labels'])")" = 3 ] || fail "the multi-class data set does not have 3 labels"
ok "$DS_BIN (3000 rows), $DS_MULTI (3 classes), $DS_NOISE (random labels)"

step "hingectl in the image"
listed=$(dc exec -T api hingectl ls datasets 2>&1) || fail "hingectl ls datasets: $listed"
grep -q "$DS_BIN" <<<"$listed" || fail "hingectl ls datasets does not list $DS_BIN: $listed"
MODEL_CTL=$(dc exec -T api hingectl train "$DS_BIN" --solver dcd -p C=1 --watch 2>"$WORK/ctl.err" | tail -1 | tr -d '\r') \
  || fail "hingectl train --watch failed: $(tail -3 "$WORK/ctl.err")"
case $MODEL_CTL in mdl_*) ;; *) fail "hingectl train --watch printed '$MODEL_CTL', not a model id" ;; esac
ok "ls lists the data set; train --watch gave $MODEL_CTL"

# -- 5. every solver ---------------------------------------------------------------------------------

step "every solver"
declare -A JOBS=()
JOBS[dcd]=$(submit "$DS_BIN" dcd '{"C": 1}')
JOBS[cpa]=$(submit "$DS_BIN" cpa '{"C": 1}')
JOBS[ocas]=$(submit "$DS_BIN" ocas '{"C": 1}')
JOBS[smo]=$(submit "$DS_BIN" smo '{"C": 1, "kernel": {"type": "rbf", "gamma": "scale"}}')
JOBS[sampled_cuts]=$(submit "$DS_BIN" sampled_cuts '{"C": 1, "kernel": {"type": "rbf", "gamma": "scale"}, "sample_size": 200}')
JOBS[dcd_multi]=$(submit "$DS_MULTI" dcd '{"C": 1}')
JOBS[smo_ovo]=$(submit "$DS_MULTI" smo '{"C": 1, "kernel": {"type": "rbf", "gamma": "scale"}, "multiclass": "ovo", "probability": true}')
declare -A MODELS=()
summary=
for name in dcd cpa ocas smo sampled_cuts dcd_multi smo_ovo; do
  wait_for 300 "job ${JOBS[$name]} ($name)" job_done "${JOBS[$name]}"
  MODELS[$name]=$(expect_model "${JOBS[$name]}")
  acc=$(must GET "/v1/models/${MODELS[$name]}" | json "round(d.get('train_accuracy') or 0, 3)")
  summary+="$name $acc, "
done
ok "train accuracy: ${summary%, }"

# -- 6. distributed search ---------------------------------------------------------------------------

step "distributed search"
JOB_SEARCH=$(submit "$DS_BIN" dcd '{"C": 1, "search": {"C": [0.01, 0.1, 1, 10], "cv_folds": 5, "distribute": true}}')
wait_for 300 "search job $JOB_SEARCH" job_done "$JOB_SEARCH"
MODEL_SEARCH=$(expect_model "$JOB_SEARCH")
hosts=$(must GET "/v1/jobs/$JOB_SEARCH" | json "sorted({w.split('.')[0] for w in (d.get('search_results') or {}).get('workers', [])})")
n_hosts=$(json "len(d)" <<<"$hosts")
[ "$n_hosts" -gt 1 ] || fail "the search's settings ran on $n_hosts worker container(s): $hosts"
ok "settings ran on $n_hosts worker containers; best C $(must GET "/v1/models/$MODEL_SEARCH" | json "(d.get('refit_params') or d.get('params') or {}).get('C')")"

# -- 7. predict and the pages ------------------------------------------------------------------------

step predict
ROWS='{"instances": [[1.0, 0.5, -1.0, 0.0, 2.0, 0, 0, 0, 0, 0, 0.3, 0, 0, 0, 0, -0.7, 0, 0, 0, 1.2], {"1": -2.0, "3": 1.5, "7": 0.25}, {"2": 1.0}]}'
for name in dcd smo sampled_cuts; do
  n=$(post_json "/v1/models/${MODELS[$name]}/predict" "$ROWS" | json "len(d['labels'])")
  [ "$n" = 3 ] || fail "predict with the $name model answered $n labels for 3 rows"
done
PRED_BEFORE=$(post_json "/v1/models/${MODELS[smo]}/predict" "$ROWS")
probs=$(post_json "/v1/models/${MODELS[smo_ovo]}/predict" '{"instances": [{"1": 0.5}], "probabilities": true}' | json "round(sum(d['probabilities'][0]), 6)")
[ "$probs" = 1.0 ] || fail "ovo probabilities sum to $probs"
for page in /metrics /ui/ /docs /openapi.json; do
  must GET "$page" >/dev/null
done
[ "$(metric hinge_workers)" = 5 ] || fail "/metrics hinge_workers is $(metric hinge_workers), not 5"
ok "labels for 3 rows from dcd, smo, sampled_cuts; probabilities sum to 1; /metrics /ui/ /docs answer"

# -- 8. a worker stopped mid-job ---------------------------------------------------------------------

step "stop a worker mid-job"
requeued0=$(metric 'hinge_job_events_total{event="requeued_on_shutdown"}')
JOB_STOP=$(long_job "$DS_NOISE")
victim=$(running_on "$JOB_STOP")
t=$(date +%s.%N)
docker stop -t 30 "$victim" >/dev/null || fail "docker stop failed"
took=$(elapsed "$t")
wait_for 120 "job $JOB_STOP after its worker stopped" job_done "$JOB_STOP"
model=$(expect_model "$JOB_STOP")
reason=$(must GET "/v1/models/$model" | json "d.get('stop_reason')")
case $policy in
  requeue)
    [ "$(metric 'hinge_job_events_total{event="requeued_on_shutdown"}')" -gt "$requeued0" ] || fail "no requeued_on_shutdown event counted"
    last=$(container_of_worker "$(worker_of "$JOB_STOP")" || true)
    [[ -n $last && $last != "$victim" ]] || fail "the job did not finish on another worker"
    [ "$reason" != interrupted ] || fail "the model is 'interrupted' under the requeue policy"
    detail="requeued, finished on another worker (stop_reason $reason)" ;;
  checkpoint)
    [ "$reason" = interrupted ] || fail "under the checkpoint policy the model says stop_reason $reason"
    detail="checkpointed (stop_reason interrupted)" ;;
esac
docker start "$victim" >/dev/null
ok "docker stop took ${took}s; $detail"

# -- 9. a worker SIGKILLed mid-job -------------------------------------------------------------------

step "SIGKILL a worker mid-job"
retried0=$(metric 'hinge_job_events_total{event="retried"}')
JOB_KILL=$(long_job "$DS_NOISE")
victim=$(running_on "$JOB_KILL")
t=$(date +%s.%N)
docker kill -s KILL "$victim" >/dev/null || fail "docker kill failed"
lost_once() { [ "$(rcli HGET "hinge:job:$1" lost)" = 1 ]; }
wait_for 60 "job $JOB_KILL to be found lost and queued again" lost_once "$JOB_KILL"
lost_after=$(elapsed "$t")
wait_for 120 "job $JOB_KILL after its worker was killed" job_done "$JOB_KILL"
expect_model "$JOB_KILL" >/dev/null
last=$(container_of_worker "$(worker_of "$JOB_KILL")" || true)
[[ -n $last && $last != "$victim" ]] || fail "the job did not finish on another worker"
[ "$(metric 'hinge_job_events_total{event="retried"}')" -gt "$retried0" ] || fail "no retried event counted"
docker start "$victim" >/dev/null
ok "noticed and queued again ${lost_after}s after the kill; succeeded on another worker"

# -- 10. Redis restarted mid-job ---------------------------------------------------------------------

step "restart redis mid-job"
wait_for 120 "5 ready workers again" all_healthy 5
count() { must GET "/v1/$1?limit=1000" | json "sorted(item['id'] for item in d['items'])"; }
before_ds=$(count datasets) before_models=$(count models)
JOB_REDIS=$(long_job "$DS_NOISE")
running_on "$JOB_REDIS" >/dev/null
before_jobs=$(count jobs)
dc restart redis >"$WORK/restart.log" 2>&1 || { cat "$WORK/restart.log"; fail "compose restart redis failed"; }
uptime=$(rcli INFO server | tr -d '\r' | sed -n 's/^uptime_in_seconds://p')
[ "${uptime:-99}" -lt 30 ] || fail "Redis was not restarted (uptime ${uptime}s)"
wait_for 120 "job $JOB_REDIS after the Redis restart" job_done "$JOB_REDIS"
expect_model "$JOB_REDIS" >/dev/null
[ "$(count datasets)" = "$before_ds" ] || fail "data sets differ after the Redis restart"
[ "$(count jobs)" = "$before_jobs" ] || fail "jobs differ after the Redis restart"
after_models=$(count models)
[ "$(json "len(set(d))" <<<"$after_models")" = "$(($(json "len(d)" <<<"$before_models") + 1))" ] || fail "models: $before_models before, $after_models after"
ok "job succeeded; data sets, jobs and models all there"

# -- 11. storage full --------------------------------------------------------------------------------

step "507 storage_full"
used=$(rcli INFO memory | tr -d '\r' | sed -n 's/^used_memory://p')
# A maxmemory that leaves less than its reserve free: the upload's record (a few hundred bytes, its shards go to
# S3) finds no room and the upload is refused before a shard is written.
small=$(python3 -c "import sys; print(int(int(sys.argv[1]) / 0.9) + 10000)" "$used")
rcli CONFIG SET maxmemory "$small" >/dev/null
body=$(api POST "/v1/datasets?name=big" -F "file=@$WORK/big.svm")
code=$(status)
predict_ok=$(api POST "/v1/models/${MODELS[dcd]}/predict" -H 'Content-Type: application/json' -d "$ROWS" >/dev/null; status)
rcli CONFIG SET maxmemory "$REDIS_MAXMEMORY_BYTES" >/dev/null
[ "$code" = 507 ] || fail "an upload past maxmemory answered HTTP $code: $(head -c 300 <<<"$body")"
[ "$(json "d['error']['code']" <<<"$body")" = storage_full ] || fail "507 without code storage_full: $body"
[ "$predict_ok" = 200 ] || fail "predict while storage is full answered $predict_ok"
must POST "/v1/datasets?name=big" -F "file=@$WORK/big.svm" >/dev/null
ok "507 storage_full at maxmemory $small; predict still 200; the same upload fits at $REDIS_MAXMEMORY"

# -- 12. a data set larger than Redis ------------------------------------------------------------------

step "data set larger than Redis"
python3 - "$WORK" "$LARGE_REPEATS" <<'EOF'
import random, sys
rnd = random.Random(1)
w = [rnd.gauss(0, 1) for _ in range(1000)]
rows = []
for _ in range(10_000):  # 10,000 rows of 34 features out of 1000, repeated: 34 million non-zeros by default
    cols = sorted(rnd.sample(range(1000), 34))
    vals = [rnd.gauss(0, 1) for _ in cols]
    y = 1 if sum(w[c] * v for c, v in zip(cols, vals)) > 0 else -1
    rows.append(f"{y} " + " ".join(f"{c + 1}:{v:.4f}" for c, v in zip(cols, vals)) + "\n")
block = "".join(rows).encode()
with open(f"{sys.argv[1]}/large.svm", "wb") as f:
    for _ in range(int(sys.argv[2])):
        f.write(block)
EOF
large_bytes=$(stat -c %s "$WORK/large.svm")
rcli CONFIG RESETSTAT >/dev/null
t=$(date +%s.%N)
DS_LARGE=$(must POST "/v1/datasets?name=large" -F "file=@$WORK/large.svm" | json "d['id']")
took=$(elapsed "$t")
arrays=$(must GET "/v1/datasets/$DS_LARGE" | json "d['nnz'] * 8 + d['n_samples'] * 16")
[ "$arrays" -gt "$REDIS_MAXMEMORY_BYTES" ] || fail "the data set's arrays ($arrays bytes) are not larger than Redis's maxmemory"
JOB_LARGE_OCAS=$(submit "$DS_LARGE" ocas '{"C": 1, "max_seconds": 240}')
JOB_LARGE_DCD=$(submit "$DS_LARGE" dcd '{"C": 1, "max_seconds": 60}')
wait_for 600 "ocas on the large data set" job_done "$JOB_LARGE_OCAS"
wait_for 600 "dcd on the large data set" job_done "$JOB_LARGE_DCD"
MODEL_LARGE=$(expect_model "$JOB_LARGE_OCAS")
expect_model "$JOB_LARGE_DCD" >/dev/null
acc=$(must GET "/v1/models/$MODEL_LARGE" | json "round(d['train_accuracy'], 3)")
n=$(post_json "/v1/models/$MODEL_LARGE/predict" '{"instances": [{"1": 0.5, "40": -1.0}, {"999": 2.0}]}' | json "len(d['labels'])")
[ "$n" = 2 ] || fail "predict with the large data set's model answered $n labels for 2 rows"
peak=$(rcli INFO memory | tr -d '\r' | sed -n 's/^used_memory_peak://p')
[ "$peak" -lt "$REDIS_MAXMEMORY_BYTES" ] || fail "Redis's memory peaked at $peak bytes, over its maxmemory"
ok "$(python3 -c "import sys; print(f'{int(sys.argv[1]) / 1e6:.0f} MB of text, {int(sys.argv[2]) / 1e6:.0f} MB of arrays')" "$large_bytes" "$arrays") uploaded in ${took}s; ocas (train accuracy $acc) and dcd trained; predicts; Redis peaked at $((peak / 1000000)) MB of $((REDIS_MAXMEMORY_BYTES / 1000000))"

# -- 13. the S3 server stopped mid-upload -------------------------------------------------------------

step "S3 stopped mid-upload"
owned_objects() {  # objects in the bucket and whether each is owned (after collecting garbage of any age)
  dc exec -T api hinge store gc --grace-s 0 >/dev/null 2>&1 || return 1
  dc exec -T api python -c '
import json, os, redis
from core.config import get_settings
from core.storage.objects import object_store
from core.storage.records import object_keys
from core.storage.documents import DatasetRecord, ModelRecord
client = redis.Redis.from_url(os.environ["REDIS_URL"])
owned = set()
for pattern, kind in (("hinge:dataset:ds_*", DatasetRecord), ("hinge:model:mdl_*", ModelRecord)):
    for key in client.scan_iter(pattern):
        if b":array:" not in key:
            owned.update(object_keys(kind.from_document(json.loads(client.get(key)))))
stored = {info.key for info in object_store(get_settings()).list("") if not info.key.startswith(".")}
print(json.dumps({"stray": sorted(stored - owned), "missing": sorted(owned - stored), "stored": len(stored)}))'
}
count_ds=$(must GET "/v1/datasets" | json "d['total']")
curl -sS -m 300 --limit-rate 100M -o "$WORK/cut.json" -w '%{http_code}' -F "file=@$WORK/large.svm" "$BASE/v1/datasets?name=cut" >"$WORK/cut.status" 2>"$WORK/cut.err" &
upload_pid=$!
sleep 1.5
docker stop -t 10 "$(s3_id)" >/dev/null || fail "docker stop of the S3 server failed"
wait "$upload_pid" || true
cut_status=$(cat "$WORK/cut.status")
[ "$cut_status" = 503 ] || fail "an upload cut by the S3 server's stop answered HTTP $cut_status: $(head -c 300 "$WORK/cut.json")"
[ "$(json "d['error']['code']" <"$WORK/cut.json")" = store_unavailable ] || fail "503 without store_unavailable: $(head -c 300 "$WORK/cut.json")"
[ "$(must GET "/v1/datasets" | json "d['total']")" = "$count_ds" ] || fail "the cut upload left a data set"
readiness=$(api GET /readyz | json "d.get('status')")
[ "$readiness" = degraded ] || fail "/readyz says $readiness while S3 is down (expected degraded)"
docker start "$(s3_id)" >/dev/null
wait_for 120 "everything healthy again after S3's restart" all_healthy 5
must POST "/v1/datasets?name=after-cut" -F "file=@$WORK/binary.svm" >/dev/null
objects=$(owned_objects) || fail "listing the bucket failed: $objects"
[ "$(json "d['stray']" <<<"$objects")" = "[]" ] || fail "objects nobody owns after the garbage collection: $objects"
[ "$(json "d['missing']" <<<"$objects")" = "[]" ] || fail "objects missing from the bucket: $objects"
ok "503 store_unavailable; no data set; /readyz degraded; the next upload works; $(json "d['stored']" <<<"$objects") objects, all owned"

# -- 14. the S3 server stopped while jobs run and wait --------------------------------------------------

step "S3 stopped mid-training"
DS_FRESH=$(must POST "/v1/datasets?name=fresh" -F "file=@$WORK/multi.svm" | json "d['id']")
JOB_DURING=$(long_job "$DS_NOISE")
running_on "$JOB_DURING" >/dev/null
docker stop -t 10 "$(s3_id)" >/dev/null || fail "docker stop of the S3 server failed"
JOB_WAITING=$(submit "$DS_FRESH" dcd '{"C": 1}')
phase_is_waiting() { [ "$(api GET "/v1/jobs/$1" | json "(d.get('progress') or {}).get('phase')" 2>/dev/null)" = "waiting for the object store" ]; }
wait_for 60 "job $JOB_WAITING to wait for the object store" phase_is_waiting "$JOB_WAITING"
sleep 3
docker start "$(s3_id)" >/dev/null
wait_for 120 "job $JOB_DURING" job_done "$JOB_DURING"
expect_model "$JOB_DURING" >/dev/null
wait_for 120 "job $JOB_WAITING after S3 came back" job_done "$JOB_WAITING"
expect_model "$JOB_WAITING" >/dev/null
wait_for 120 "everything healthy again" all_healthy 5
ok "a running job finished; a job on a data set not cached waited for S3 and succeeded once it was back"

# -- 15. the S3 server restarted: nothing lost ---------------------------------------------------------

step "S3 restarted"
before_ds=$(count datasets)
dc restart s3 >"$WORK/restart-s3.log" 2>&1 || { cat "$WORK/restart-s3.log"; fail "compose restart s3 failed"; }
wait_for 120 "everything healthy after the S3 restart" all_healthy 5
docker exec "$(service_ids worker | head -1)" sh -c 'rm -rf /var/lib/hinge/cache/datasets/ds_*' || fail "could not empty the cache"
JOB_REFETCH=$(submit "$DS_BIN" dcd '{"C": 1}')
wait_for 120 "a job after the S3 restart" job_done "$JOB_REFETCH"
expect_model "$JOB_REFETCH" >/dev/null
[ "$(count datasets)" = "$before_ds" ] || fail "data sets differ after the S3 restart"
objects=$(owned_objects) || fail "listing the bucket failed: $objects"
[ "$(json "d['missing']" <<<"$objects")" = "[]" ] || fail "objects lost in the S3 restart: $objects"
ok "data sets all there; a job fetched its data set again from the restarted server; no object missing"

# -- 16. a corrupted cached shard ----------------------------------------------------------------------

step "corrupted cached shard"
objective_of() { must GET "/v1/models/$1" | json "d['objective']"; }
reference=$(objective_of "$(expect_model "$JOB_REFETCH")")
docker exec "$(service_ids worker | head -1)" python -c '
import sys, numpy as np
path = f"/var/lib/hinge/cache/datasets/{sys.argv[1]}/indices.npy"
mapped = np.load(path, mmap_mode="r+")
mapped[len(mapped) // 2] += 7  # a byte that changed on disk
mapped.flush()' "$DS_BIN" || fail "could not change the cached copy"
JOB_CORRUPT=$(submit "$DS_BIN" dcd '{"C": 1}')
wait_for 120 "a job on the damaged copy" job_done "$JOB_CORRUPT"
again=$(objective_of "$(expect_model "$JOB_CORRUPT")")
[ "$again" = "$reference" ] || fail "the objective on the repaired copy is $again, not $reference"
worker=$(container_of_worker "$(worker_of "$JOB_CORRUPT")") || fail "no container ran $JOB_CORRUPT"
docker logs "$worker" 2>&1 | grep -q "did not match their checksum" || fail "the worker's log does not say it found the damage"
ok "found by its CRC-32, that shard fetched again; the same objective as before ($reference)"

# -- 17. a worker with an empty cache -----------------------------------------------------------------

step "worker with an empty cache"
fresh=$(dc run -d -e HINGE_CACHE_DIR=/tmp/empty-cache worker 2>"$WORK/run-fresh.err" | tail -1) \
  || fail "compose run of a fresh worker failed: $(cat "$WORK/run-fresh.err")"
fresh_host=$(docker inspect -f '{{.Config.Hostname}}' "$fresh")
fresh_beats() { [ -n "$(rcli --scan --pattern "hinge:worker:$fresh_host.*" | head -1)" ]; }
wait_for 120 "the fresh worker's heartbeat" fresh_beats
wait_for 120 "/readyz to count 6 workers" ready_count_is 6
# shellcheck disable=SC2046
pause_workers $(service_ids worker)
JOB_FRESH=$(submit "$DS_MULTI" dcd '{"C": 1}')
wait_for 120 "a job on the fresh worker" job_done "$JOB_FRESH"
ran_on=$(worker_of "$JOB_FRESH")
unpause_workers
expect_model "$JOB_FRESH" >/dev/null
[ "${ran_on%%.*}" = "$fresh_host" ] || fail "the job ran on $ran_on, not on the fresh worker $fresh_host"
docker rm -f "$fresh" >/dev/null
ok "the job ran on a worker whose cache was empty: fetched from S3, succeeded"

# -- 18. workers on another host ----------------------------------------------------------------------

step "workers on another host"
remote up -d --no-build --scale worker=2 >"$WORK/remote-up.log" 2>&1 || { cat "$WORK/remote-up.log"; fail "compose up of $REMOTE_PROJECT failed"; }
remote_ids() { docker ps -q --filter "label=com.docker.compose.project=$REMOTE_PROJECT" --filter "label=com.docker.compose.service=worker"; }
wait_for 300 "/readyz to count 7 workers" ready_count_is 7
remote_hosts=$(for id in $(remote_ids); do docker inspect -f '{{.Config.Hostname}}' "$id"; done | sort | tr '\n' ' ')
# shellcheck disable=SC2046
pause_workers $(service_ids worker)
JOB_REMOTE=$(submit "$DS_LARGE" ocas '{"C": 1, "max_seconds": 240}')
wait_for 900 "a job on the other host" job_done "$JOB_REMOTE"
unpause_workers
expect_model "$JOB_REMOTE" >/dev/null
ran_on=$(worker_of "$JOB_REMOTE")
grep -qw "${ran_on%%.*}" <<<"$remote_hosts" || fail "the job ran on $ran_on, not on the other host's workers ($remote_hosts)"
# a search of 6 folds over 1 main and 2 other workers (the other main workers paused), each fold long enough that
# no worker takes them all
# shellcheck disable=SC2046
pause_workers $(service_ids worker | tail -n +2)
JOB_BOTH=$(submit "$DS_NOISE" dcd '{"C": 1, "search": {"C": [0.01, 0.1, 1, 10], "cv_folds": 6, "distribute": true}}')
wait_for 300 "a search over both hosts" job_done "$JOB_BOTH"
unpause_workers
expect_model "$JOB_BOTH" >/dev/null
hosts=$(must GET "/v1/jobs/$JOB_BOTH" | json "sorted({w.split('.')[0] for w in (d.get('search_results') or {}).get('workers', [])})")
on_remote=$(json "len([h for h in d if h in '$remote_hosts'.split()])" <<<"$hosts")
on_main=$(json "len([h for h in d if h not in '$remote_hosts'.split()])" <<<"$hosts")
{ [ "$on_remote" -ge 1 ] && [ "$on_main" -ge 1 ]; } || fail "the search ran on $hosts, not on both hosts (other host: $remote_hosts)"
remote down -v -t 30 >"$WORK/remote-down.log" 2>&1 || { cat "$WORK/remote-down.log"; fail "compose down of $REMOTE_PROJECT failed"; }
ok "2 workers reaching Redis and S3 at $PUBLISH_BIND:$REDIS_PORT and :$S3_PORT; ocas on the large data set ran there; a search ran on $on_main main and $on_remote other worker container(s)"

# -- optional: a worker that compiles every kernel itself (HINGE_TEST_COLD=1) --------------------------

if [ "${HINGE_TEST_COLD:-0}" = 1 ]; then
  step "cold worker (compiles)"
  # No seed and a cache of its own: the first start on a host whose CPU the image was not built for.
  cold=$(dc run -d -e HINGE_KERNEL_SEED_DIR= -e HINGE_KERNEL_CACHE_DIR=/tmp/kernels-cold worker 2>"$WORK/run.err" | tail -1) \
    || fail "compose run of a cold worker failed: $(cat "$WORK/run.err")"
  host=$(docker inspect -f '{{.Config.Hostname}}' "$cold") || fail "no container $cold"
  cold_beat() {  # the cold worker's heartbeat record (JSON), or nothing
    local key
    key=$(rcli --scan --pattern "hinge:worker:$host.*" | head -1)
    [ -n "$key" ] && rcli GET "$key"
  }
  cold_takes_jobs() { [ "$(cold_beat | json "d.get('ready')" 2>/dev/null)" = true ]; }
  cold_compiled() { [ "$(cold_beat | json "bool(d.get('ready') and not (d.get('warming') or {}).get('left'))" 2>/dev/null)" = true ]; }
  wait_for 120 "the cold worker to take jobs" cold_takes_jobs
  takes_jobs=$(elapsed "$STEP_T0")
  note "cold worker takes jobs after ${takes_jobs}s; compiling: $(cold_beat | json "','.join((d.get('warming') or {}).get('left') or [])")"
  wait_for 900 "the cold worker to compile every kernel" cold_compiled
  health=$(docker inspect -f '{{.State.Health.Status}}' "$cold")
  never_unhealthy
  docker rm -f "$cold" >/dev/null
  ok "took jobs after ${takes_jobs}s, every kernel compiled after $(elapsed "$STEP_T0")s; health $health, never unhealthy"
fi

# -- 19. down, then up: data kept --------------------------------------------------------------------

step "down, then up"
before_ds=$(count datasets) before_jobs=$(count jobs) before_models=$(count models)
dc down -t 30 >"$WORK/down1.log" 2>&1 || { cat "$WORK/down1.log"; fail "compose down failed"; }
t=$(date +%s.%N)
dc up -d --no-build --scale worker=2 >"$WORK/up2.log" 2>&1 || { cat "$WORK/up2.log"; fail "compose up failed"; }
wait_for 600 "redis, api and 2 workers healthy again" all_healthy 2
again=$(elapsed "$t")
[ "$(count datasets)" = "$before_ds" ] || fail "data sets differ after down and up"
[ "$(count jobs)" = "$before_jobs" ] || fail "jobs differ after down and up"
[ "$(count models)" = "$before_models" ] || fail "models differ after down and up"
[ "$(post_json "/v1/models/${MODELS[smo]}/predict" "$ROWS")" = "$PRED_BEFORE" ] || fail "the smo model predicts differently after down and up"
docker exec "$(service_ids worker | head -1)" sh -c 'rm -rf /var/lib/hinge/cache/datasets/ds_*' || fail "could not empty the cache"
JOB_AFTER=$(submit "$DS_BIN" ocas '{"C": 1}')
wait_for 120 "a job after down and up" job_done "$JOB_AFTER"
expect_model "$JOB_AFTER" >/dev/null
objects=$(owned_objects) || fail "listing the bucket failed: $objects"
[ "$(json "d['missing']" <<<"$objects")" = "[]" ] || fail "objects lost in down and up: $objects"
never_unhealthy
ok "healthy again after ${again}s; $(json "len(d)" <<<"$before_ds") data sets, $(json "len(d)" <<<"$before_jobs") jobs, $(json "len(d)" <<<"$before_models") models kept; same predictions; a new job fetched its data set from S3 again"

step "no container unhealthy"
never_unhealthy
ok "polled every second for the whole run"
