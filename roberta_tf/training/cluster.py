"""Multi-worker clusters (TF_CONFIG): meeting the peers before TensorFlow does, and naming the
worker behind a failure.

Two faults that TensorFlow alone handles badly:
- **A peer that never starts** (a wrong address, a machine not up): building
  MultiWorkerMirroredStrategy blocks in C++ holding the GIL, silently and for good, and no Python
  signal handler runs (SIGTERM and Ctrl-C are ignored). `wait_for_peers` therefore meets the
  peers first, in Python: each worker listens on its own TF_CONFIG address and polls the
  others' until every one answers (a peer's rendezvous listener or its TF server), logging whom
  it waits for; SIGTERM and Ctrl-C stop it at once (one error line), and after `timeout_s` it
  gives up with one line naming the peers it never reached. Only then is the strategy built,
  on the same port.
- **A peer that dies mid-run** (`kill -9`, an OOM kill, a lost machine): the survivors' next
  collective fails after the heartbeat timeout with a TF error whose FIRST line says little
  ("Collective ops is aborted by: ..."); the cause ("The following tasks are unhealthy ...
  /job:worker/replica:0/task:1") is further down. `failure_text` scans the whole message for the
  known causes and names the worker, its address and what to do (restart every worker with the
  same command; it resumes from the newest checkpoint).

TensorFlow-free (the strategy module builds the strategy after `wait_for_peers`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import signal
import socket
import time
from collections.abc import Callable

from roberta_tf.common import error_text

DEFAULT_PEER_TIMEOUT_S = 600

_TASK_REF = re.compile(r"/job:(\w+)/(?:replica:\d+/)?task:(\d+)")
# Known causes, most specific first: (pattern, what happened to the tasks named after it).
_CAUSES = (
    (re.compile(r"tasks are unhealthy|stopped sending heartbeats", re.I),
     "stopped sending heartbeats (it crashed, was killed or lost its machine)"),
    (re.compile(r"Socket closed|Connection reset|Broken pipe|Connection refused|"
                r"failed to connect to all addresses|UNAVAILABLE", re.I),
     "closed its connection (it stopped or its machine went away)"),
    (re.compile(r"Deadline ?Exceeded|DEADLINE_EXCEEDED|timed out", re.I),
     "did not answer in time (it hangs, or the network is down)"),
)


class ClusterError(RuntimeError):
  """A multi-worker run cannot start or go on; the message names the workers and what to do."""


@dataclasses.dataclass(frozen=True)
class Cluster:
  """TF_CONFIG read: every task as (job, index, address), and this process's task."""
  tasks: tuple[tuple[str, int, str], ...]
  job: str
  index: int

  @property
  def address(self) -> str:
    return self.address_of(self.job, self.index)

  def address_of(self, job: str, index: int) -> str:
    for j, i, address in self.tasks:
      if (j, i) == (job, index):
        return address
    return "?"

  @property
  def peers(self) -> list[tuple[str, int, str]]:
    return [t for t in self.tasks if (t[0], t[1]) != (self.job, self.index)]


def name(job: str, index: int, address: str) -> str:
  return f"{job} {index} ({address})"


def read_tf_config(environ=None) -> Cluster:
  """The cluster of the TF_CONFIG environment variable.

  Raises:
    ValueError: TF_CONFIG missing, not JSON, or without this task in its cluster.
  """
  text = (environ if environ is not None else os.environ).get("TF_CONFIG")
  if not text:
    raise ValueError("--strategy=multi_worker needs the TF_CONFIG environment variable "
                     "(cluster spec and this worker's task), see README")
  try:
    config = json.loads(text)
    cluster, task = config["cluster"], config["task"]
    tasks = tuple((job, i, str(address)) for job, addresses in cluster.items()
                  for i, address in enumerate(addresses))
    job, index = str(task["type"]), int(task["index"])
  except json.JSONDecodeError as e:
    raise ValueError(f"TF_CONFIG is not valid JSON: {e}") from e
  except (KeyError, TypeError, ValueError, AttributeError) as e:
    raise ValueError("TF_CONFIG must be {\"cluster\": {JOB: [host:port, ...]}, \"task\": "
                     f"{{\"type\": JOB, \"index\": N}}}}: {e!r}") from e
  result = Cluster(tasks, job, index)
  if result.address == "?":
    raise ValueError(f"TF_CONFIG's task {job} {index} is not in its cluster {cluster}")
  return result


def _split(address: str) -> tuple[str, int]:
  host, _, port = address.rpartition(":")
  return host.strip("[]") or "localhost", int(port)


def _answers(address: str, timeout_s: float = 0.5) -> bool:
  try:
    with socket.create_connection(_split(address), timeout=timeout_s):
      return True
  except (OSError, ValueError):
    return False


def wait_for_peers(cluster: Cluster, timeout_s: float, log: Callable[[str], None],
                   poll_s: float = 0.5, log_every_s: float = 10.0) -> None:
  """Returns once every peer of `cluster` answers at its address (see the module docstring).

  Raises:
    ClusterError: this worker's address is taken, SIGTERM arrived, or `timeout_s` passed with
      peers unreached (named, with their addresses).
  """
  if not cluster.peers:
    return
  host, port = _split(cluster.address)
  listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
  listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
  try:
    listener.bind(("" if host in ("localhost", "0.0.0.0") else host, port))
    listener.listen(16)
  except OSError as e:
    listener.close()
    raise ClusterError(f"cannot listen on this worker's TF_CONFIG address {cluster.address} "
                       f"({name(cluster.job, cluster.index, cluster.address)}): {e.strerror or e}; "
                       "is another process using the port?") from e

  def on_signal(signum, frame):
    del frame
    name = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C (SIGINT)"
    raise ClusterError(f"stopped by {name} while waiting for {_names(missing)}; nothing was "
                       "trained")

  start = time.monotonic()
  missing = list(cluster.peers)
  # Both signals are handled here whatever this process inherited: a worker started from a
  # script or a job runner may have SIGINT ignored, and waiting must still stop on Ctrl-C.
  previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
  try:
    next_log = 0.0
    while True:
      missing = [t for t in missing if not _answers(t[2])]
      if not missing:
        break
      waited = time.monotonic() - start
      if waited >= timeout_s:
        raise ClusterError(
            f"gave up after {waited:.0f} s (--peer_timeout) waiting for {_names(missing)}, "
            "never reached: start every worker of TF_CONFIG's cluster with the same command, "
            "check the addresses, or raise --peer_timeout")
      if waited >= next_log:
        log(f"{name(cluster.job, cluster.index, cluster.address)} waiting for "
            f"{_names(missing)} to start ({waited:.0f} s of --peer_timeout={timeout_s:g} s)")
        next_log += log_every_s
      time.sleep(poll_s)
  finally:
    for s, handler in previous.items():
      signal.signal(s, handler)
    listener.close()  # TensorFlow's server takes the port next
  if time.monotonic() - start > poll_s:
    log(f"all {len(cluster.tasks)} workers reached")


def _names(tasks) -> str:
  return ", ".join(name(*t) for t in tasks)


def failure_text(message: str, cluster: Cluster, model_dir: str = "",
                 newest_step: int | None = None) -> str | None:
  """One line for a TF error `message` of a multi-worker run whose cause is a peer, or None.

  Names the failed task(s) with their addresses (the tasks referenced after the cause; other
  task references, e.g. the reporting device, are skipped when the cause names some) and what
  to do: restart every worker with the same command, resuming from ckpt-`newest_step`.
  """
  for pattern, what in _CAUSES:
    match = pattern.search(message)
    if not match:
      continue
    after = {(j, int(i)) for j, i in _TASK_REF.findall(message[match.start():])}
    anywhere = {(j, int(i)) for j, i in _TASK_REF.findall(message)}
    own = (cluster.job, cluster.index)
    failed = sorted(after - {own}) or sorted(anywhere - {own})
    if failed:
      who = ", ".join(name(j, i, cluster.address_of(j, i)) for j, i in failed)
    else:
      who = "a peer of " + name(cluster.job, cluster.index, cluster.address)
    where = f" in {model_dir}" if model_dir else ""
    resume = (f"it resumes from ckpt-{newest_step}{where}" if newest_step else
              f"it resumes from the newest checkpoint{where}, if one was saved")
    return (f"{who} {what}; restart every worker of the cluster with the same command: "
            f"{resume}")
  return None


@contextlib.contextmanager
def named_failures(cluster: Cluster | None, model_dir: str, newest_step: Callable[[], int | None]):
  """Re-raises a TF error whose cause is a peer (failure_text) as a ClusterError naming it."""
  try:
    yield
  except Exception as e:
    text = (failure_text(str(e.message), cluster, model_dir, newest_step())
            if cluster and error_text.is_tf_error(e) else None)
    if text is None:
      raise
    raise ClusterError(text) from e
