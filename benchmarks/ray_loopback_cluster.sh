#!/bin/sh
# A 2-node Ray cluster on the loopback interface (docs/campaigns.md "Measured"): a head node and
# a second node, each with its own CPUs, temp dir and ports, on one machine.
#   sh benchmarks/ray_loopback_cluster.sh start [CPUS_PER_NODE]   then: jitsim ... --ray 127.0.0.1:6390
#   sh benchmarks/ray_loopback_cluster.sh stop
# Started without PYTHONPATH: the campaign ships jitsim to the workers (runtime_env py_modules).
set -e
PORT=${RAY_LOOPBACK_PORT:-6390}
CPUS=${2:-1}
case "$1" in
start)
    env -u PYTHONPATH RAY_AUTH_MODE=token ray start --head --node-ip-address=127.0.0.1 --port=$PORT --num-cpus=$CPUS \
        --temp-dir=/tmp/ray-loop-head --include-dashboard=false --disable-usage-stats \
        --node-manager-port=6391 --object-manager-port=6392 --min-worker-port=11000 --max-worker-port=11099 \
        --metrics-export-port=6393 --dashboard-agent-listen-port=6394 --dashboard-agent-grpc-port=6395 \
        --runtime-env-agent-port=6396 --ray-client-server-port=10001
    env -u PYTHONPATH RAY_AUTH_MODE=token ray start --address=127.0.0.1:$PORT --node-ip-address=127.0.0.1 --num-cpus=$CPUS \
        --temp-dir=/tmp/ray-loop-node2 --disable-usage-stats \
        --node-manager-port=6401 --object-manager-port=6402 --min-worker-port=11100 --max-worker-port=11199 \
        --metrics-export-port=6403 --dashboard-agent-listen-port=6404 --dashboard-agent-grpc-port=6405 \
        --runtime-env-agent-port=6406
    RAY_AUTH_MODE=token ray status --address=127.0.0.1:$PORT | sed -n '1,20p'
    ;;
stop)
    ray stop
    ;;
*)
    echo "usage: $0 start [CPUS_PER_NODE] | stop" >&2; exit 2 ;;
esac
