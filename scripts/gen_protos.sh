#!/usr/bin/env bash
# Regenerate the Python modules of the .proto files kept in the repository.
# Needs grpcio-tools built against protobuf 6.x (e.g. `pip install 'grpcio-tools<1.77'`),
# so the generated code imports with the protobuf<7 runtime tritonclient also needs.
# The generated modules register into tritonpy's private descriptor pool, and build
# their classes with its own symbol database (core/tritonpy/_protos.py), so they never
# clash with tritonclient's copies, whichever protobuf implementation runs.
# Usage: scripts/gen_protos.sh   (PYTHON=.venv/bin/python to pick the interpreter)
# To add a .proto: list it in PROTOS (messages only) or SERVICES (with gRPC stubs).
set -euo pipefail
cd "$(dirname "$0")/../core"
PYTHON="${PYTHON:-python}"
case "$PYTHON" in /*) ;; */*) PYTHON="$OLDPWD/$PYTHON" ;; esac  # relative to where it was run
PROTOS=(tritonpy/config/model_config.proto)
SERVICES=(tritonpy/grpc/grpc_service.proto tritonpy/grpc/health.proto)
"$PYTHON" -m grpc_tools.protoc -I . --python_out=. --pyi_out=. "${PROTOS[@]}"
"$PYTHON" -m grpc_tools.protoc -I . --python_out=. --pyi_out=. --grpc_python_out=. "${SERVICES[@]}"
PROTOS+=("${SERVICES[@]}")
for proto in "${PROTOS[@]}"; do
  module="${proto%.proto}_pb2.py"
  sed -i \
    -e 's/^from google.protobuf import descriptor_pool as _descriptor_pool$/from tritonpy import _protos/' \
    -e 's/_descriptor_pool\.Default()/_protos.POOL/' \
    -e 's/_builder\.BuildTopDescriptorsAndMessages(/_protos.build_messages(/' \
    "$module"
  grep -q "_protos.POOL" "$module" && grep -q "_protos.build_messages" "$module" ||
    { echo "failed to retarget $module" >&2; exit 1; }
done
echo "regenerated: ${PROTOS[*]}"
