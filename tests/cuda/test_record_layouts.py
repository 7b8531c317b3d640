"""The CUPTI activity records librlscope_cuda parses (native/cuda/activity.cpp), as laid
out by the CUPTI headers it is built against, cross-checked with NVIDIA's cupti-python
record definitions (its numpy dtypes): every field the collector reads at the same
offset, each record the same size. Skips without the ``cupti`` extra."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from fake_build import cupti_include

# Record -> (cupti-python dtype, the fields native/cuda/activity.cpp reads).
RECORDS = {
    "CUpti_ActivityKernel10": ("activity_kernel10_dtype",
                               ["kind", "start", "end", "deviceId", "streamId", "correlationId",
                                "name", "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ",
                                "graphId", "graphNodeId"]),
    "CUpti_ActivityMemcpy6": ("activity_memcpy6_dtype",
                              ["kind", "copyKind", "bytes", "start", "end", "deviceId",
                               "streamId", "correlationId"]),
    "CUpti_ActivityMemset4": ("activity_memset4_dtype",
                              ["kind", "bytes", "start", "end", "deviceId", "streamId",
                               "correlationId"]),
    "CUpti_ActivityOverhead3": ("activity_overhead3_dtype",
                                ["kind", "overheadKind", "objectKind", "objectId", "start",
                                 "end"]),
    "CUpti_ActivityExternalCorrelation": ("activity_external_correlation_dtype",
                                          ["kind", "externalKind", "externalId",
                                           "correlationId"]),
}


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


@pytest.fixture(scope="module")
def c_layouts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, int]]:
    """{record: {field: offset, "sizeof": size}} compiled from the CUPTI headers."""
    inc = cupti_include()
    cxx = shutil.which("g++")
    if inc is None or cxx is None:
        pytest.skip("CUPTI headers or g++ not found")
    lines = ['#include <cupti.h>', '#include <cstddef>', '#include <cstdio>', 'int main() {',
             '  printf("{");']
    for i, (rec, (_, fields)) in enumerate(RECORDS.items()):
        items = [f'\\"{f}\\": %zu' for f in fields] + ['\\"sizeof\\": %zu']
        args = [f"offsetof({rec}, {f})" for f in fields] + [f"sizeof({rec})"]
        sep = ", " if i else ""
        lines.append(f'  printf("{sep}\\"{rec}\\": {{{", ".join(items)}}}", {", ".join(args)});')
    lines += ['  printf("}\\n");', "  return 0;", "}"]
    d = tmp_path_factory.mktemp("layouts")
    (d / "layouts.cpp").write_text("\n".join(lines))
    r = subprocess.run([cxx, "-std=c++17", f"-I{inc}", "-o", str(d / "layouts"),
                        str(d / "layouts.cpp")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = subprocess.run([str(d / "layouts")], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("record", sorted(RECORDS))
def test_layout_matches_cupti_python(record: str, c_layouts: dict[str, dict[str, int]]):
    cupti = pytest.importorskip("cupti.cupti", reason="cupti-python (the cupti extra)")
    dtype_name, fields = RECORDS[record]
    dt = getattr(cupti, dtype_name)
    want = c_layouts[record]
    assert dt.itemsize == want["sizeof"], record
    for f in fields:
        assert snake(f) in dt.fields, f"{record}.{f}"
        assert dt.fields[snake(f)][1] == want[f], f"{record}.{f}"


def test_fake_writes_the_sizes_the_headers_give(c_layouts: dict[str, dict[str, int]]):
    """The 13.0 sizes the collector was written for (docs/cuda.md)."""
    assert c_layouts["CUpti_ActivityKernel10"]["sizeof"] == 216
    src = (Path(__file__).parent / "fake_cupti.cpp").read_text()
    for rec in RECORDS:
        assert f"sizeof({rec})" in src
