"""Several processes, one run: qlib on JAX's distributed runtime (``jax.distributed``).

A job of P processes (one per GPU on a cluster, or several CPU processes on one machine) calls
:func:`initialize` in every process before any JAX computation; ``jax.devices()`` then lists
the devices of every process, and :func:`qlib.supermarket.simulate`,
:func:`qlib.supermarket.simulate_many`, :func:`qlib.supermarket.meeting_times` (and ``_many``),
:func:`qlib.supermarket.coupled_paths` and :func:`qlib.heterogeneous.simulate` split their
replicas over all of them. Every process runs the same program (the same calls with the same
arguments, in the same order): each places only its own devices' replicas
(:func:`qlib._sharding.put`), the results are gathered to every process
(:func:`qlib._sharding.gather`), and every host-side decision of the drivers (grow the level
cap? have all replicas met?) is taken from gathered or globally reduced values, so the
processes never diverge. Replica r's stream depends only on (seed, r): a job of any size gives
the numbers of one process, bit for bit (tests/test_distributed.py, two CPU processes).

``python -m qlib.distributed ARGS`` joins the job (parameters auto-detected, e.g. under SLURM,
or from ``JAX_COORDINATOR_ADDRESS``, ``QLIB_NUM_PROCESSES``, ``QLIB_PROCESS_ID``) and then runs
the command line ``python -m qlib ARGS`` (e.g. ``reproduce --scale 4``) in every process.
README.md, "Running on a cluster", has a SLURM script.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from qlib import _validate as V
from qlib.config import RunConfig, current

NUM_PROCESSES_ENV = RunConfig.ENV["num_processes"]
PROCESS_ID_ENV = RunConfig.ENV["process_id"]


def _env_int(name: str) -> int | None:
    raw = {NUM_PROCESSES_ENV: current().num_processes, PROCESS_ID_ENV: current().process_id}[name]
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer; got {raw!r}") from None


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, *, local_device_ids: Sequence[int] | None = None,
               timeout: int = 300) -> None:
    """Join this process to a multi-process JAX job; call before any JAX computation.

    ``coordinator_address`` ("host:port" of process 0), ``num_processes`` (P) and
    ``process_id`` (0..P-1) default to ``JAX_COORDINATOR_ADDRESS``, ``QLIB_NUM_PROCESSES`` and
    ``QLIB_PROCESS_ID``, and where those are unset JAX detects them (SLURM, Open MPI, TPU pods...).
    ``local_device_ids`` picks this process's accelerators (default: JAX's choice; under SLURM
    with one task per GPU, the GPU of the task). ``timeout``: seconds to wait for every process
    to join. On CPU the processes exchange data through gloo (TCP). Raises ValueError for a bad
    process count or id, before JAX is touched.
    """
    num_processes = _env_int(NUM_PROCESSES_ENV) if num_processes is None else num_processes
    process_id = _env_int(PROCESS_ID_ENV) if process_id is None else process_id
    if num_processes is not None:
        num_processes = V.integer("num_processes", num_processes, low=1)
    if process_id is not None:
        process_id = V.integer("process_id", process_id, low=0,
                               high=None if num_processes is None else num_processes - 1)
    timeout = V.integer("timeout", timeout, low=1)

    import jax

    # CPU collectives between processes (gloo over TCP); GPUs use NCCL whatever this says
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=coordinator_address, num_processes=num_processes,
                               process_id=process_id, local_device_ids=local_device_ids,
                               initialization_timeout=timeout)


def main(argv: list[str] | None = None) -> int:
    """``python -m qlib.distributed ARGS``: :func:`initialize`, then ``python -m qlib ARGS``."""
    initialize()
    from qlib.__main__ import main as cli  # the command line imports JAX: only after initialize()

    return cli(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
