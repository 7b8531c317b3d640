"""A Python grandchild started through a process rlscope does not trace (a shell here; a
Ray job's workers are the children of its C++ raylet), alive while this process reports
progress; then ended."""

import subprocess
import sys

import rlscope

if __name__ == "__main__":
    code = "import sys; sys.stdin.read()"
    shell = subprocess.Popen(["sh", "-c", f'"{sys.executable}" -c "{code}"; true'],
                             stdin=subprocess.PIPE)
    rlscope.report_progress(1, 2)
    rlscope.report_progress(2, 2)
    assert shell.stdin is not None
    shell.stdin.close()  # the grandchild reads it: its end ends the grandchild
    shell.wait()
