"""Progress reports while a child process (not Python: not recorded) is alive, as a
simulator server would be: forked chunk copies would share it."""

import subprocess

import rlscope

child = subprocess.Popen(["sleep", "120"])
acc = 0
try:
    for i in range(1, 401):
        with rlscope.operation("step"):
            for j in range(200):
                acc += j * i
        if i % 50 == 0:
            rlscope.report_progress(i, 400)
finally:
    child.kill()
    child.wait()
print("done")
