"""What the benchmarks print about the machine they ran on."""
from __future__ import annotations

import platform


def cpu_name() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo, else what the platform module knows)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"
