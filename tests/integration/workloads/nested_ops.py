"""Nested operations with the same leaf ("forward") under two parents, a forked helper
process that does nothing annotated, and a slow import before the loop: the workload of
the readable-figures and start-up tests. Prints its own measurements as JSON."""

import json
import multiprocessing as mp
import time

t_import = time.monotonic_ns()
import nested_slow  # noqa: E402, F401  (beside this file: 0.2 s to import)

t_imported = time.monotonic_ns()
import torch  # noqa: E402

import rlscope  # noqa: E402


def busy(s: float) -> None:
    t = time.perf_counter()
    while time.perf_counter() - t < s:
        pass


def helper() -> None:
    pass


def main() -> None:
    p = mp.get_context("fork").Process(target=helper)
    p.start()
    p.join()
    x = torch.ones(32, 32)
    first = time.monotonic_ns()
    with rlscope.phase("training"):
        first_after = time.monotonic_ns()
        for i in range(10):
            with rlscope.operation("inference"), rlscope.operation("forward"):
                torch.mm(x, x)
                busy(0.001)
            with rlscope.operation("backprop"):
                with rlscope.operation("forward"):
                    torch.mm(x, x)
                    torch.mm(x, x)
                    busy(0.002)
                with rlscope.operation("backward"):
                    busy(0.003)
            rlscope.report_progress((i + 1) * 10, 200)
    print(json.dumps({"import_s": (t_imported - t_import) / 1e9, "import_ns": [t_import,
                      t_imported], "first_event_ns": [first, first_after],
                      "helper_pid": p.pid}))


if __name__ == "__main__":
    main()
