"""JSON-lines records a benchmark appends as each timed window finishes (with the machine's load
average then: the machine is shared, and a window's figure means little without it)."""

from __future__ import annotations

import json
import os


def load_average() -> str:
  """The 1, 5 and 15 minute load averages, as `uptime` prints them."""
  return " ".join(f"{x:.2f}" for x in os.getloadavg())


def append(path: str, record: dict) -> None:
  """Appends `record` as one JSON line to `path` ('' : nothing)."""
  if path:
    with open(path, "a", encoding="utf-8") as f:
      f.write(json.dumps(record) + "\n")
