"""One run in several processes: ``accelerate launch`` or ``torchrun`` starts them, each on its
own device, each on its share of the questions (:mod:`.shares`).

:func:`processes` says which process this is (None when the run has one): the rank, the number
of processes and the device, from accelerate's ``PartialState`` (which reads what the launcher
set: torchrun's ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``, or MPI's; it puts each process on
``cuda:LOCAL_RANK``, or the CPU). The processes talk through ``torch.distributed`` with the gloo
backend (a barrier and one gather of small objects, so no GPU collective is needed), with a long
timeout: a process that finishes its share early waits for the others.

Each process appends its records to its own part, ``RUN_DIR/parts/K-of-N.jsonl``; the main
process then folds the parts into ``RUN_DIR/results.jsonl`` in the data's order
(:func:`absorb_parts`, which also folds the parts a killed run left, whatever their number of
processes) and writes the one report. Its progress bar counts the lines every part gains
(:class:`PartsProgress`), so it shows the whole run's questions once.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import pathlib
import shutil
import threading
from dataclasses import dataclass
from typing import Any

from .runs import RESULTS, read_results

PARTS = "parts"
#: the variables a launcher sets to the number of processes (torchrun, MPI implementations)
WORLD_SIZE_VARIABLES = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
#: the variables a launcher sets to this process's rank
RANK_VARIABLES = ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK")
#: how long a process waits for the others (a share may take hours longer than another)
TIMEOUT = _dt.timedelta(days=7)


def launched_processes() -> int:
    """How many processes the launcher started (1 when there is no launcher)."""
    for name in WORLD_SIZE_VARIABLES:
        try:
            value = int(os.environ.get(name, "1"))
        except ValueError:
            continue
        if value > 1:
            return value
    return 1


def one_process_note() -> str | None:
    """A warning when ``accelerate launch --num_processes N`` (N > 1) started this process
    alone: its simple launcher (``--cpu``, or no GPU) starts several processes only through
    MPI (``--mpirun_hostfile``). None otherwise."""
    if launched_processes() > 1 or "ACCELERATE_USE_CPU" not in os.environ:
        return None
    if "MASTER_ADDR" not in os.environ:  # the launcher sets it only for several processes
        return None
    return ("accelerate launch started one process, not several (without GPUs, or with "
            "--cpu, it starts several only through MPI, --mpirun_hostfile): this run goes on "
            "in one process. For several processes on CPUs use accelerate launch --multi_gpu "
            "--num_processes N (torchrun underneath) or torchrun --nproc_per_node N")


def where() -> str:
    """"rank 1 of 2" when a launcher started several processes, else "" (for messages, before
    the processes know each other)."""
    count = launched_processes()
    if count <= 1:
        return ""
    rank = next((os.environ[name] for name in RANK_VARIABLES if name in os.environ), "?")
    return f"rank {rank} of {count}"


@dataclass(frozen=True)
class Processes:
    """This process among the run's ``count`` processes: ``rank`` from 0 (0: the main one,
    which merges and reports) and its ``device`` ("cuda:1", "cpu")."""

    rank: int
    count: int
    device: str

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def name(self) -> str:
        return f"rank {self.rank} of {self.count}"

    def wait(self) -> None:
        """Wait until every process is here."""
        import torch.distributed as dist

        dist.barrier()

    def gather(self, value: Any) -> list[Any]:
        """Every process's ``value`` (picklable), in rank order, in every process."""
        import torch.distributed as dist

        out: list[Any] = [None] * self.count
        dist.all_gather_object(out, value)
        return out


_PROCESSES: list[Processes | None] = []


def processes() -> Processes | None:
    """This process, when a launcher started several (None otherwise); the process group is
    set up once, on the first call."""
    if launched_processes() <= 1:
        return None
    if not _PROCESSES:
        import torch
        from accelerate import PartialState

        state = PartialState(cpu=not torch.cuda.is_available(), backend="gloo",
                             timeout=TIMEOUT)
        _PROCESSES.append(Processes(state.process_index, state.num_processes,
                                    str(state.device)))
    return _PROCESSES[0]


def part_path(out: pathlib.Path, rank: int, count: int) -> pathlib.Path:
    return out / PARTS / f"{rank + 1}-of-{count}.jsonl"


def absorb_parts(out: pathlib.Path) -> int:
    """Fold every part under ``RUN_DIR/parts`` into ``RUN_DIR/results.jsonl``: the records
    of both, each question once (the first record of an index wins), in the data's order,
    written to a new file that then replaces the old one; then the parts are removed. A part's
    torn last line (a killed process) is dropped. Returns how many records the parts added;
    without parts nothing is rewritten."""
    folder = out / PARTS
    parts = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if not parts:
        shutil.rmtree(folder, ignore_errors=True)
        return 0
    results = out / RESULTS
    by_index: dict[int, dict] = {}
    for row in read_results(results, repair=True):
        by_index.setdefault(row["index"], row)
    before = len(by_index)
    for part in parts:
        for row in read_results(part):
            by_index.setdefault(row["index"], row)
    fresh = results.with_name(RESULTS + ".merging")
    with open(fresh, "w", encoding="utf-8") as f:
        for index in sorted(by_index):
            f.write(json.dumps(by_index[index], ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(fresh, results)
    shutil.rmtree(folder)
    return len(by_index) - before


class PartsProgress:
    """Moves ``bar`` (a tqdm bar) by the lines the run's part files gain, every
    ``interval`` seconds, in a thread of the main process, until :meth:`stop`."""

    def __init__(self, bar: Any, folder: pathlib.Path, interval: float = 1.0) -> None:
        self.bar, self.folder, self.interval = bar, folder, interval
        self._read: dict[pathlib.Path, int] = {}  # bytes of each part already counted
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> "PartsProgress":
        self._thread.start()
        return self

    def _count(self) -> int:
        gained = 0
        for part in sorted(self.folder.glob("*.jsonl")):
            start = self._read.get(part, 0)
            try:
                with open(part, "rb") as f:
                    f.seek(start)
                    chunk = f.read()
            except OSError:
                continue
            whole = chunk.rfind(b"\n") + 1  # count finished lines only
            gained += chunk[:whole].count(b"\n")
            self._read[part] = start + whole
        return gained

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            gained = self._count()
            if gained:
                self.bar.update(gained)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        gained = self._count()
        if gained:
            self.bar.update(gained)
