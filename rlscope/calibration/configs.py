"""The configurations a calibration runs: each switches one more kind of book-keeping on,
so run-time differences (with the event counts of each run) separate the kinds."""

from __future__ import annotations

from dataclasses import dataclass

from rlscope.analysis.overhead.kinds import BACKEND_CALL, CUDA_API, SIMULATOR_CALL, WAIT_CALL
from rlscope.calibration.estimate import UNINSTRUMENTED
from rlscope.intercept import ANNOTATING, BACKENDS, SIMULATORS, WAITS


@dataclass(frozen=True)
class Config:
    name: str
    record: bool = True
    annotations: bool = True  # RLSCOPE_ANNOTATIONS
    intercept: tuple[str, ...] = ()  # RLSCOPE_INTERCEPT libraries
    cuda: bool = False
    cuda_activity: bool = True  # with cuda: activity records too (not only API callbacks)
    needs: str = ""  # kind whose events make this configuration worth running

    @property
    def intercept_spec(self) -> str:
        return ",".join(self.intercept) or "none"


def configurations(intercept: list[str], cuda: bool) -> list[Config]:
    """From the main run's settings: ``intercept`` (library names it intercepts) and
    whether the CUDA collector is injected."""
    def only(group: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(n for n in intercept if n in group)

    ann = only(ANNOTATING)
    out = [Config(UNINSTRUMENTED, record=False, annotations=False),
           Config("base", annotations=False),
           Config("annotations", intercept=ann)]
    if only(BACKENDS):
        out.append(Config("annotations+backend", intercept=ann + only(BACKENDS),
                          needs=BACKEND_CALL))
    if only(SIMULATORS):
        out.append(Config("annotations+simulator", intercept=ann + only(SIMULATORS),
                          needs=SIMULATOR_CALL))
    if only(WAITS):
        out.append(Config("annotations+wait", intercept=ann + only(WAITS), needs=WAIT_CALL))
    full = tuple(intercept)
    if cuda:
        # CUDA API callbacks alone, then with activity records: the two costs apart.
        out.append(Config("full-no-cuda", intercept=full))
        out.append(Config("full-cuda-api", intercept=full, cuda=True, cuda_activity=False,
                          needs=CUDA_API))
        out.append(Config("full", intercept=full, cuda=True))
    else:
        out.append(Config("full", intercept=full))
    return out


def prune(configs: list[Config], counts: dict[str, dict[str, int]]) -> list[Config]:
    """After a first round: drop configurations whose kind recorded no events, and those
    whose events are the same kinds as a later one (``full`` is always kept)."""
    kept = [c for c in configs if not c.needs or counts.get(c.name, {}).get(c.needs, 0)]
    out = []
    for i, c in enumerate(kept):
        kinds = {k for k, n in counts.get(c.name, {}).items() if n}
        later = [{k for k, n in counts.get(d.name, {}).items() if n} for d in kept[i + 1:]
                 if d.record]
        if c.record and c.name != "full" and kinds in later:
            continue
        out.append(c)
    return out
