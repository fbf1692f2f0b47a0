"""Lowering a process's CPU priority so that it yields to the request path, where Linux schedules by autogroup.

With autogroup scheduling (most Linux desktops and VMs) the kernel shares the CPU between sessions first and only
then by nice value inside each, so a niced process in a session of its own, or a niced thread, still takes a full
share from every other session. The autogroup's own nice value is what makes it yield.
"""

from __future__ import annotations

import os


def lower_priority(niceness: int) -> None:
    """Nice this process and its session's autogroup (call it in a session of its own)."""
    os.nice(niceness)
    try:
        with open("/proc/self/autogroup", "w") as group:
            group.write(str(niceness))
    except OSError:
        pass  # no autogroup here: the plain nice value is what counts
