"""Driver of the two-node Ray test: records under rls-prof, has each node's worker record
``stamp`` operations between realtime readings, and writes those readings to a file.

    python ray_two_hosts.py ADDRESS STAMPS_JSON
"""

import json
import sys
import time

import ray

import rlscope
from rlscope.launch.child_env import worker_env


@ray.remote(num_cpus=0)
def stamp(node: str) -> dict:
    import os

    out = []
    for _ in range(5):
        r0 = time.time_ns()
        with rlscope.operation(f"stamp-{node}"):
            pass
        out.append((r0, time.time_ns()))
    rlscope.flush()  # the worker outlives the job; its trace must not wait for that
    return {"node": node, "pid": os.getpid(), "host": os.environ.get("RLSCOPE_HOST"),
            "recording": rlscope.is_active(), "stamps": out}


def main() -> None:
    address, path = sys.argv[1], sys.argv[2]
    ray.init(address=address, runtime_env={"env_vars": worker_env()},
             log_to_driver=False)
    results = []
    with rlscope.operation("driver"):
        for _ in range(3):  # ping-pong: the nodes' stamps interleave in time
            for node in ("node-a", "node-b"):
                results.append(ray.get(stamp.options(resources={node: 0.01}).remote(node)))
    with open(path, "w") as f:
        json.dump(results, f)
    ray.shutdown()


if __name__ == "__main__":
    main()
