"""Which envs lag in an async vector env (EnvPool, PufferLib): the integrations' tally of
sampled batches (on a stand-in recv), written as metadata at stop and read back by the
lock-step analysis, and the lag rule on known counts."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import rlscope
from rlscope.analysis.lockstep.batches import AsyncBatches, from_metadata
from rlscope.integrations.batches import Tally
from rlscope.reporters.lockstep import batch_lines
from rlscope.trace import format as fmt
from rlscope.trace.reader import read_trace


def _batches(counts: list[int], tallied: int, batch_size: int) -> AsyncBatches:
    return AsyncBatches(1, "p", "Pool#1", len(counts), batch_size, tallied * 10, tallied,
                        np.asarray(counts))


def test_a_slow_env_lags_an_even_pool_does_not():
    # 400 batches of 4 from 8 envs: an even share is 200 each.
    even = _batches([200] * 8, 400, 4)
    assert even.lagging() == []
    assert np.allclose(even.relative(), 1.0)
    slow = _batches([120, 200, 210, 190, 200, 160, 230, 290], 400, 4)
    assert slow.counts.sum() == 1600
    # 3 SD of an even count: 3 * sqrt(400 * .5 * .5) = 30, 15% of 200.
    assert abs(slow.resolution() - 0.15) < 1e-9
    assert slow.lagging() == [0, 5]  # 40% and 20% below; env 3 (5%) is within the noise
    text = "\n".join(batch_lines(slow))
    assert "lagging (in clearly fewer batches: slower steps): env 0 (0.60x), 5 (0.80x)" in text


def test_few_counts_tell_nothing():
    b = _batches([3, 1, 2, 2], 4, 2)  # 4 batches: an even share is 2
    assert b.resolution() > 1.0 and b.lagging() == []
    assert "no env lags by more than these counts resolve" in "\n".join(batch_lines(b))


def test_malformed_metadata_is_skipped():
    key = fmt.META_ASYNC_BATCHES_PREFIX
    good = {"num_envs": 2, "batch_size": 1, "batches": 9, "tallied": 3, "counts": [2, 1]}
    md = {key + "A#1": good, key + "B#2": {"num_envs": 3, "counts": [1]},
          key + "C#3": dict(good, counts=[1, 2, 3]), key + "D#4": "not a dict",
          "other": good}
    [b] = from_metadata(7, "proc", md)
    assert (b.pid, b.name, b.tallied, b.counts.tolist()) == (7, "A#1", 3, [2, 1])
    assert b.library == "EnvPool"  # older traces name no library: EnvPool's
    [b] = from_metadata(7, "proc", {key + "A#1": dict(good, library="PufferLib")})
    assert b.library == "PufferLib"
    text = "\n".join(batch_lines(b))
    assert text.startswith("A#1 (PufferLib, async: 2 envs, batches of 1)")
    assert "an env lags with its worker" in text


def test_tally_counts_sampled_batches_and_is_written_at_stop(tmp_path: Path):
    n, size = 8, 4
    rlscope.start(tmp_path / "t")
    try:
        tally = Tally("Pool#1", "EnvPool", n, size, lambda out: out[1])
        groups = [np.arange(0, 4, dtype=np.int32), np.arange(4, 8, dtype=np.int32)]
        step = [0]

        def recv() -> list[object]:  # batches alternate between two groups of envs
            ids = groups[step[0] % 2]
            step[0] += 1
            return [np.zeros(size), ids]

        tapped = tally.tap(recv)
        for _ in range(64 + 1600):
            out = tapped()
            assert out[1] is groups[(step[0] - 1) % 2]  # the result passes unchanged
    finally:
        rlscope.stop()
    [p] = read_trace(tmp_path / "t").processes
    [b] = from_metadata(p.pid, "p", p.metadata)
    assert (b.num_envs, b.batch_size, b.batches, b.library) == (n, size, 1664, "EnvPool")
    # The first 64 batches all, then one in 8-24 (~100 of 1600).
    assert 64 + 1600 // 24 <= b.tallied <= 64 + 1600 // 8 + 1
    assert b.counts.sum() == b.tallied * size
    # Random strides see both groups about equally, though the batches alternate.
    assert b.lagging() == []
    assert abs(b.counts[0] - b.counts[4]) < 0.25 * b.counts[0]
    # A later recording counts its own batches: none here, so nothing is written.
    rlscope.start(tmp_path / "t2")
    rlscope.stop()
    [p2] = read_trace(tmp_path / "t2").processes
    assert from_metadata(p2.pid, "p", p2.metadata) == []
    assert tally.batches == 0


def test_a_forked_child_counts_its_own_batches():
    import os

    tally = Tally("Pool#1", "EnvPool", 4, 2, lambda out: out[0])
    tally.tap(lambda: [np.array([0, 1])])()
    assert tally.tallied == 1
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: nothing counted yet
        os.write(w, str(tally.tallied + tally.batches).encode())
        os._exit(0)
    os.close(w)
    got = os.read(r, 16)
    os.waitpid(pid, 0)
    assert got == b"0" and tally.tallied == 1  # the parent keeps its counts
