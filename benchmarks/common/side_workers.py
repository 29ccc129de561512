"""One side of a training comparison in a process of its own, driven over pipes by JSON lines
(throughput_vs_hf.py): TF's and torch's thread pools in one process would fight over the cores, and
the idle sides wait blocked on their pipes while one side's window runs.

Protocol: the driver writes the side's spec as one line; the worker builds its step and
answers {"ready": true, **info}; then each {"steps": n} is answered with {"seconds", "loss"}
(n steps, one host sync at the end); {"quit": true} ends it.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable


class WorkerError(RuntimeError):
  pass


def serve_requests(build: Callable[[dict], tuple[object, dict]],
                   handle: Callable[[object, dict], dict]) -> int:
  """A worker's loop: `build(spec)` -> (state, info) for the first line, answered with
  {"ready": true, **info}; then each request line but {"quit": true} is answered with
  `handle(state, request)`. Answers go to the original stdout; anything else printing to
  stdout lands on stderr (peer_sides.py's workers use it too)."""
  answers = os.fdopen(os.dup(1), "w", buffering=1)
  os.dup2(2, 1)
  state, info = build(json.loads(sys.stdin.readline()))
  answers.write(json.dumps({"ready": True, **info}) + "\n")
  for line in sys.stdin:
    request = json.loads(line)
    if request.get("quit"):
      break
    answers.write(json.dumps(handle(state, request)) + "\n")
  return 0


def _steps(step: Callable[[], object], request: dict) -> dict:
  start = time.perf_counter()
  for _ in range(request["steps"]):
    out = step()
  loss = float(out)  # the host sync
  return {"seconds": time.perf_counter() - start, "loss": loss}


def serve(build: Callable[[dict], tuple[Callable[[], object], dict]]) -> int:
  """The training worker's loop (see the module docstring): `build(spec)` -> (step, info),
  `step()` returning a loss whose float() waits for the step."""
  return serve_requests(build, _steps)


class Worker:
  """One side's process (`command`, which calls `serve`), spoken to by JSON lines over pipes
  (peer_rounds.Worker speaks the serving workers' requests through the same client).

  Attributes: `ready` (its ready answer, once `start` returned), `last_loss`.
  """

  def __init__(self, label: str, command: list[str], spec: dict, stderr_path: str,
               timeout: float, cwd: str, env: dict | None = None):
    self.label, self.timeout, self.last_loss = label, timeout, float("nan")
    self.stderr_path, self.ready = stderr_path, {}
    with open(stderr_path, "w", encoding="utf-8") as stderr:
      self.proc = subprocess.Popen(  # pylint: disable=consider-using-with
          command, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
          text=True, env=env)
    self._send(spec)

  def start(self) -> dict:
    """Waits for the worker's ready answer (its info) and keeps it."""
    self.ready = self.answer()
    return self.ready

  def _send(self, message: dict) -> None:
    try:
      self.proc.stdin.write(json.dumps(message) + "\n")
      self.proc.stdin.flush()
    except BrokenPipeError:
      pass  # the worker is gone; the next answer reports why

  def answer(self) -> dict:
    """The worker's next answer; WorkerError with its stderr's tail if it died or hung."""
    ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
    line = self.proc.stdout.readline() if ready else ""
    if not line:
      if ready:
        self.proc.wait()
      else:
        self.proc.kill()
      with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
        tail = "".join(f.readlines()[-30:])
      why = (f"exited with status {self.proc.returncode}" if ready
             else f"gave no answer in {self.timeout:.0f}s")
      raise WorkerError(f"the {self.label} worker {why}; its stderr ends:\n{tail}")
    return json.loads(line)

  def run(self, steps: int) -> float:
    """Seconds `steps` steps took."""
    self._send({"steps": steps})
    answer = self.answer()
    self.last_loss = answer["loss"]
    return answer["seconds"]

  def close(self) -> None:
    self._send({"quit": True})
    try:
      self.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
      self.proc.kill()
      self.proc.wait()
