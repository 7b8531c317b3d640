"""Build step: compile proto/rlscope/trace.proto into a Python module holding its
serialized FileDescriptorSet (``rlscope/trace/_descriptor.py``).

rlscope does not ship protoc-generated ``*_pb2`` code: gencode from a new protoc checks
the protobuf runtime's version and refuses old ones, and old runtimes reject new gencode.
The descriptor bytes are plain data, so ``rlscope.trace.messages`` builds the message
classes from them with whichever protobuf the user's environment has. A module rather than
a data file, because editable installs find CMake-installed modules but not data files.

    python scripts/build/descriptor_module.py PROTO_ROOT PROTO_FILE OUT_PY
"""

from __future__ import annotations

import os
import sys
import tempfile


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    root, proto, out = argv
    from grpc_tools import protoc  # build-time only (pyproject's build-system.requires)

    with tempfile.TemporaryDirectory() as tmp:
        desc = os.path.join(tmp, "trace.desc")
        rc = protoc.main(["protoc", f"-I{root}", "--include_imports",
                          f"--descriptor_set_out={desc}", proto])
        if rc != 0:
            print(f"protoc failed on {proto} (exit status {rc})", file=sys.stderr)
            return 1
        with open(desc, "rb") as f:
            data = f.read()
    text = ('"""Generated at build time by scripts/build/descriptor_module.py from '
            'proto/rlscope/trace.proto; do not edit."""\n\n'
            f"FILE_DESCRIPTOR_SET = {data!r}\n")
    tmp_out = out + ".tmp"
    with open(tmp_out, "w") as f:
        f.write(text)
    os.replace(tmp_out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
