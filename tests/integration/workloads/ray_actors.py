"""Two Ray actors stepped by the driver, one twice as slow (CPU-bound loops), and a few
remote tasks. Writes the actors' ids and scales to argv[1] (JSON)."""

import json
import sys
import time

import ray

import rlscope

STEPS = 20


@ray.remote
class Worker:
    def __init__(self, scale: float):
        self.scale = scale

    def step(self, i: int) -> int:
        with rlscope.operation("actor_step"):
            # A fixed amount of CPU work: on a loaded machine both actors' steps stretch
            # alike, where a wall-clock loop would end at once after any preemption.
            end = time.thread_time() + 0.01 * self.scale
            while time.thread_time() < end:
                pass
        return i


@ray.remote
def double(x: int) -> int:
    with rlscope.operation("task_op"):
        return 2 * x


if __name__ == "__main__":
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    workers = [Worker.remote(1.0), Worker.remote(2.0)]
    for i in range(STEPS):
        # One actor at a time: stepped together on 2 loaded cores, the fast actor's step
        # competes with the slow one throughout and the slow one's tail runs alone, so
        # their wall times read 1.45x apart, not 2x (seen with one busy loop beside).
        for w in workers:
            ray.get(w.step.remote(i))
    assert ray.get([double.remote(i) for i in range(4)]) == [0, 2, 4, 6]
    with open(sys.argv[1], "w") as f:
        json.dump({w._actor_id.hex(): s for w, s in zip(workers, (1.0, 2.0), strict=True)}, f)
    ray.shutdown()
