#!/bin/sh
# Start SeaweedFS's all-in-one server with one S3 identity (from the environment) and Hinge's bucket.
set -eu
: "${S3_ACCESS_KEY_ID:?set S3_ACCESS_KEY_ID (docker/compose.yaml passes HINGE_S3_ACCESS_KEY_ID)}"
: "${S3_SECRET_ACCESS_KEY:?set S3_SECRET_ACCESS_KEY (docker/compose.yaml passes HINGE_S3_SECRET_ACCESS_KEY)}"
BUCKET=${S3_BUCKET:-hinge}
CONFIG=$(mktemp)
chmod 600 "$CONFIG"
python3 -c '
import json, os, sys
identity = {"name": "hinge", "credentials": [{"accessKey": os.environ["S3_ACCESS_KEY_ID"],
            "secretKey": os.environ["S3_SECRET_ACCESS_KEY"]}], "actions": ["Admin", "Read", "Write", "List", "Tagging"]}
json.dump({"identities": [identity]}, open(sys.argv[1], "w"))' "$CONFIG"
# -ip: the address the parts of the one process use among themselves; -ip.bind: where they listen (S3 must be
# reachable from the other containers; the others are not published).
exec weed mini -dir=/data -ip=127.0.0.1 -ip.bind=0.0.0.0 -admin.ui=false -webdav=false \
    -s3.config="$CONFIG" -bucket="$BUCKET" "$@"
