"""The count chain of the supermarket model (docs/models.md, "count chain"): its state, its step and
the one chunk driver (:class:`ChainDriver`) of simulate, meeting times and coupled paths. Lanes (one
replica of one parameter point each, with its own :class:`LaneParams`) are on every array's last axis.
The event map is in :mod:`qlib.supermarket.events`, the observers in :mod:`qlib.supermarket.observers`,
the step and the sequential loops in :mod:`qlib.supermarket.loop`; their names are re-exported here.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from qlib import _sharding
from qlib import _validate as V
from qlib._progress import progress_bar
from qlib._xla import auto_configure, small_loop_bytes

# re-exported: the names callers and tests use as chain.X (the event map, the step, the observers)
from qlib.supermarket.events import (  # noqa: F401
    EVENT_KINDS,
    MODEL,
    TABLE_BYTES,
    TABLE_MAX_ROWS,
    WITH_REPLACEMENT_ONLY,
    EventMap,
    Events,
    LaneParams,
    _events,
    _with_norm,
    departure_rank,
    draw,
    draw_block,
    join_threshold,
    log_falling,
    log_g,
    simulated_lam,
    table_threshold,
    threshold_table,
    uniform_log,
)
from qlib.supermarket.loop import (  # noqa: F401
    ChainState,
    _local_advance,
    apply,
    level,
    small_loops_in_one_kernel,
    step,
)
from qlib.supermarket.observers import _LOOP_BYTES, FLOW_BITS, OBSERVERS, flow_g, flow_units  # noqa: F401

# the resolvable ranges and the exact event map live with the validated point
from qlib.supermarket.point import LAM_RESOLUTION, MAX_N, Point, arrival_threshold  # noqa: F401

#: Which random streams the chain uses: 1 = one word per step (32-bit event, uniform and rank,
#: up to issue 12), 2 = two 64-bit words per step (issue 13). A result cached under another
#: version holds other numbers for the same seed.
STREAM_VERSION = 2


def point_params(point: Point | tuple) -> tuple:
    """(n, d, A, 0.0) of one parameter point, as host scalars (see :class:`LaneParams`).

    ``point``: a :class:`~qlib.supermarket.point.Point` (the simulation's entry points pass
    one, validated by :meth:`Point.simulation`), or a plain (n, d, lam) that is made one."""
    if not isinstance(point, Point):
        point = Point.simulation(*point)
    return int(point.n), float(point.d), point.arrival_threshold, 0.0


def lane_params(points: list[Point | tuple], lanes_per_point: list[int]) -> LaneParams:
    """Host arrays of :class:`LaneParams` for consecutive lanes: point j (a Point or (n, d, lam)),
    repeated lanes_per_point[j] times."""
    cols = list(zip(*(point_params(p) for p in points))) if points else [[], [], [], []]
    rep = np.asarray(lanes_per_point, dtype=np.int64)
    n, d, thr, ln = (np.repeat(np.asarray(c, dtype=t), rep) for c, t in
                     zip(cols, (np.uint64, np.float64, np.uint64, np.float64)))
    return LaneParams(n=n, d=d, arrival=thr, log_norm=ln)


@functools.cache
def _advance_fn(devices: tuple, obs_ndims: tuple, replacement: bool, observe: str, block: int,
                group: int, frames: int, with_log_u: bool, variant: EventMap = MODEL,
                flow_replacement: bool = True, inner: bool = False, table: bool = False):
    """The jitted kernel for one static configuration: shard_map over the lanes, no communication.
    With ``table`` it takes a seventh argument, the lanes' threshold tables (rows, lanes)."""
    spec = _sharding.lane_spec
    state_spec = ChainState(spec(1), spec(3), spec(1))
    obs_spec = tuple(spec(k) for k in obs_ndims)
    p_spec = LaneParams(spec(1), spec(1), spec(1), spec(1))
    fn = functools.partial(_local_advance, replacement=replacement, observe=observe, block=block,
                           group=group, frames=frames, variant=variant, flow_replacement=flow_replacement,
                           inner=inner)
    out_specs = (state_spec, obs_spec, spec(4) if frames else None)
    in_specs = (state_spec, obs_spec, p_spec, spec(1), spec(0), spec(0)) + ((spec(2),) if table else ())
    mapped = jax.shard_map(fn, mesh=_sharding.mesh(devices), in_specs=in_specs,
                           out_specs=out_specs, check_vma=False)
    return jax.jit(mapped)


# --------------------------------------------------------------------------- sizing

#: Below this many lanes per device (one chain, the integer step), each lane is its own group (issue 43).
ONE_LANE_GROUPS_BELOW = 8


def group_width(lanes_per_device: int, levels: int, chains: int, observe: str, replacement: bool) -> int:
    """Lanes per sequential group: the widest power of two (dividing the lanes) whose loop XLA:CPU
    still compiles into one kernel; on other backends all lanes of a device in one group.

    Except for a few lanes of one chain (fewer than :data:`ONE_LANE_GROUPS_BELOW` per device, the
    integer step, the loop one kernel): there one lane per group. A step of 2-4 lanes costs about
    as much per lane as one lane's (the loop's cost per iteration does not shrink with the group
    until ~32 lanes fill the vectors), and the one-lane loop keeps its counts in registers: measured
    (AMD EPYC, 2 cores, n = 1000, d = 10, CPU time, load 14) 1.19x the rate of groups of 4 at R = 8
    and 1.08x groups of 2 at R = 4. The group width never changes the numbers."""
    if jax.default_backend() != "cpu":
        return lanes_per_device
    if (lanes_per_device < ONE_LANE_GROUPS_BELOW and chains == 1 and replacement
            and small_loops_in_one_kernel()):
        return 1
    per = _LOOP_BYTES[observe] * (levels + 1) * chains * (1 if replacement else 3)
    g = 1
    while g * 2 <= lanes_per_device and lanes_per_device % (g * 2) == 0 and (g
                                                                             * 2) * per <= small_loop_bytes():
        g *= 2
    return g


def block_length(group: int, replacement: bool) -> int:
    """Steps per block of draws of one group, 4..2048.

    Sampling with replacement, where the group's step loop compiles into one kernel (XLA:CPU,
    groups of at most 64 lanes under :func:`qlib.configure_xla`'s threshold): about 2^9 (step,
    lane) events. The loop's body reads the block's events, so a bigger block pushes it past the
    threshold (2^13 events ran 2.4x slower at 8 lanes), and XLA splits a bigger draw over two
    threads, which a lone replica pays for with a spinning thread (2^11 events: 53 against 62 M
    replica-steps/s at R = 1). Wider groups: about 2^13 events, so a block's words, floats and
    events stay in cache (2^11-2^13 best, 2^16 ~20% slower); without replacement too (2^9 was 10%
    slower at R >= 64). Measured on 2 cores, n = 1000, d = 10. The block length never changes the
    numbers (the draws are counter-based)."""
    small = replacement and small_loops_in_one_kernel() and group <= 64
    b = (2 ** 9 if small else 2 ** 13) // max(1, group) // (1 if replacement else 2)
    return int(min(2048, max(4, 1 << max(0, b.bit_length() - 1))))


# --------------------------------------------------------------------------- the driver

def pad_levels(a: np.ndarray, width: int, axis: int = 0) -> np.ndarray:
    """Zero-pad axis ``axis`` of ``a`` to length ``width`` (counts above the cap are zero)."""
    pad = [(0, 0)] * a.ndim
    pad[axis] = (0, width - a.shape[axis])
    return np.pad(a, pad)


def grown(levels: int, limit: int | None = None) -> int:
    """The next level cap after an overflow, never above ``limit`` (no queue can pass it)."""
    L = levels + max(4, levels // 2)
    return L if limit is None else max(levels, min(L, limit))


def final_levels(start: int, peak: int, limit: int | None = None) -> int:
    """The cap a run that starts at ``start`` levels ends with when its longest queue is ``peak``:
    the first of start, grown(start), ... that is >= peak (a chunk is rerun with more levels
    whenever an arrival would pass the cap)."""
    L = start
    while L < peak:
        L = grown(L, limit)
    return L


def level_limit(start_levels: int, steps: int) -> int:
    """No queue can pass this level: one step lengthens the longest queue by at most one."""
    return int(start_levels) + int(steps)


class ChainDriver:
    """Runs lanes of the count chain in chunks: the one driver of simulate, meeting times and paths.

    It owns the device state (:class:`ChainState`, lanes padded to a multiple of the device
    count and split over the devices), the chunk sizing, the level cap (when an arrival would
    pass it, the cap grows and the chunk is rerun from its saved start, so nothing is ever
    truncated) and the progress bar. ``u0`` has shape (chains, levels+1, lanes), ``rng0`` and
    the :class:`LaneParams` arrays shape (lanes,); lanes are in the caller's order.

    With several processes (:mod:`qlib.distributed`) every process builds the same driver and
    places only its own devices' lanes; what it returns is gathered from all of them, and its
    decisions (rerun with more levels? all met?) come from global values, the same everywhere.
    """

    def __init__(self, u0: np.ndarray, rng0: np.ndarray, params: LaneParams, *, replacement: bool,
                 levels: int, progress: bool, total: int, desc: str, max_levels: int | None = None,
                 bytes_per_level: float = 0.0, variant: EventMap = MODEL, capacity: bool = False):
        auto_configure()  # qlib's XLA flags, if nothing has started JAX yet (qlib._xla)
        C, L0p1, lanes = u0.shape
        # ``replacement`` is the model's sampling rule (the level-flow sums use it); the event
        # map samples the other way only for the "other_sampling" variant
        self.variant = variant
        self.flow_replacement = bool(replacement)
        self.replacement = bool(replacement) ^ (variant.kind == "other_sampling")
        self.lanes, self.chains = lanes, C
        self.levels = max(int(levels), L0p1 - 1)
        # the bounded model (docs/models.md#bounded-model): the cap is the capacity, never grows,
        # and an arrival at it is lost (counted in ChainState.overflow)
        self.capacity = bool(capacity)
        if self.capacity:
            max_levels = self.levels
        # the level cap grows up to max_levels; bytes_per_level (device and caller's host
        # arrays) lets every growth be checked against the memory available first
        self.max_levels = None if max_levels is None else max(int(max_levels), self.levels)
        self.bytes_per_level = float(bytes_per_level)
        # no device holds only padding (in one process): a single chain runs on one device
        self.devices = _sharding.lane_devices(lanes)
        D = len(self.devices)
        W = -(-max(lanes, 1) // D) * D
        self.width = W
        self.per_device = W // D
        # physical position of logical lane j; padding lanes (j >= lanes) are inactive
        self.pos = _sharding.interleave(W, D)
        u = np.zeros((C, self.levels + 1, W), np.uint32)
        u[:, :L0p1, self.pos[:lanes]] = u0
        rng = np.zeros(W, np.uint64)
        rng[self.pos[:lanes]] = rng0
        ps = [np.zeros(W, a.dtype) for a in params]
        for full, a in zip(ps, params):
            full[self.pos[:lanes]] = a
        ps[0][self.pos[lanes:]] = 1  # padding lanes: a harmless n = 1
        self.active = np.zeros(W, bool)
        self.active[self.pos[:lanes]] = True
        with jax.enable_x64(True):
            self.params = LaneParams(*(self._put(a) for a in ps))
            self.state = ChainState(self._put(rng), self._put(u), self._put(np.zeros(W, np.int64)))
        # without replacement: the lanes' exact threshold tables where they fit (events.TABLE_BYTES)
        self.table = self._tables(ps, variant) if not self.replacement else None
        self.integer = self.replacement or self.table is not None  # the step compares integers
        self.seen = np.zeros((self.levels + 1, W), bool)
        self.seen |= np.any(u > 0, axis=0)
        self.bar = progress_bar(total, show=progress and _sharding.is_main_process(), desc=desc)
        self.t = 0

    # -- helpers

    def _tables(self, ps: list, variant: EventMap):
        """The (rows, lanes) uint64 threshold tables of sampling without replacement (column j:
        :func:`threshold_table` of lane j's n and the event map's d; zeros for padding lanes), on
        the devices; None when they would pass TABLE_BYTES or TABLE_MAX_ROWS (the kernel then
        carries log g)."""
        n, d = ps[0], ps[1] + (variant.value if variant.kind == "d_offset" else 0.0)
        act = self.active
        if not act.any():
            return None
        rows = int(n[act].max()) + 1
        if rows > TABLE_MAX_ROWS or rows * self.width * 8 > TABLE_BYTES:
            return None
        if np.any((d[act] < 1) | (d[act] > n[act]) | (d[act] != np.round(d[act]))):
            return None
        tab = np.zeros((rows, self.width), np.uint64)
        for j in np.flatnonzero(act):
            t = threshold_table(int(n[j]), int(d[j]))
            tab[: t.size, j] = t
        with jax.enable_x64(True):
            return self._put(tab)

    @staticmethod
    def device_bytes_per_level(lanes: int, chains: int) -> float:
        """Device bytes per count level over ``lanes`` lanes: counts (uint32 per chain), chunk
        sums or flags (int64 + int32), and their host copies."""
        return float(lanes) * (4 * chains + 12 + 12)

    def _put(self, a):
        # a global array: each process fills only its own devices' lanes (see qlib._sharding)
        return _sharding.put(a, devices=self.devices)

    def mask(self, lane_mask: np.ndarray | None) -> np.ndarray:
        """A per-logical-lane bool mask -> physical, padding lanes False (None: all real lanes)."""
        if lane_mask is None:
            return self.active
        out = np.zeros(self.width, bool)
        out[self.pos[:self.lanes]] = lane_mask
        return out

    def lanes_of(self, a) -> np.ndarray:
        """Physical last axis -> logical lanes (padding dropped), as a host array; a device
        array is gathered first (from every process: all must call this together)."""
        return _sharding.gather(a)[..., self.pos[:self.lanes]]

    def meeting_state(self, D0: np.ndarray, T0: np.ndarray) -> tuple:
        """The (D, T) observer of meeting times on the devices, from per-logical-lane int arrays
        (padding lanes: D = 0 and T = 0, i.e. met and inactive)."""
        out = []
        for a in (D0, T0):
            full = np.zeros(self.width, np.int64)
            full[self.pos[: self.lanes]] = a
            with jax.enable_x64(True):
                out.append(self._put(full))
        return tuple(out)

    def _grow(self) -> None:
        L = grown(self.levels, self.max_levels)
        if L == self.levels:  # cannot happen: no queue passes max_levels
            raise RuntimeError(f"a queue passed the level limit {self.max_levels}")
        if self.bytes_per_level:
            V.memory("levels", (L + 1) * self.bytes_per_level,
                     f"the level cap grows to {L}: {L + 1} counts x {self.bytes_per_level:.3g} bytes per "
                     "count over all replicas and buffers")
        with jax.enable_x64(True):
            u = jnp.pad(self.state.u, ((0, 0), (0, L - self.levels), (0, 0)))
            self.state = ChainState(self.state.rng, self._put(u), self._put(np.zeros(self.width, np.int64)))
        self.seen = pad_levels(self.seen, L + 1)
        self.levels = L

    def chunk_steps(self, block: int) -> int:
        # About 2^25 (lane, count) updates per call: long enough to amortise the call (at one
        # replica a call of 2^20 steps spent ~10% of its time outside the loop), short enough for
        # a live progress bar and a cheap rerun on growth; <= 2^22 steps keeps the int64 chunk
        # sums exact (counts < 2^32: 2^54; level-flow units <= 2^FLOW_BITS = 2^40: 2^62 < 2^63).
        m = 2**25 // max(1, self.width * (self.levels + 1) * self.chains)
        m = max(block, min(2**22, m)) // block * block
        return int(m)

    def _call(self, obs, active, t0: int, m: int, observe: str, frames: int):
        G = self.per_device
        group = group_width(G, self.levels, self.chains, observe, self.integer)
        block = block_length(group, self.integer)
        # a short chunk (a frame of a trajectory, a batch end) draws a short block, so a frame
        # of record_every = 1 draws one step, not 16: four sizes at most, so few compiles
        # (for frames: the span of all of them, and frames no longer than a block are recorded
        # inside the group's loop, see _local_record)
        span = m * max(frames, 1)
        block = next((b for b in (1, 4, 16, 256) if span <= b < block), block)
        # (the in-loop recorder runs the model's event map with the plain observers only)
        inner = bool(frames) and m <= block and observe in ("sums", "seen") and self.variant.kind == "model"
        fn = _advance_fn(self.devices, tuple(np.ndim(o) for o in obs), self.replacement,
                         observe, block, group, frames, not self.replacement, self.variant,
                         self.flow_replacement, inner, self.table is not None)
        extra = () if self.table is None else (self.table,)
        with jax.enable_x64(True):
            return fn(self.state, obs, self.params, active, jnp.int64(t0), jnp.int64(m), *extra)

    # -- running

    def run(self, steps: int, *, observe: str = "seen", active: np.ndarray | None = None,
            meet: tuple | None = None, frames: int = 0) -> dict:
        """Advance the active lanes ``steps`` steps (or, with ``frames``, ``frames`` frames of
        ``steps`` steps each, recording the counts after each frame).

        ``observe``: "sums" returns exact int64 time sums ``sum_u`` and ``sum_busy`` of chain 0,
        shape (levels+1, lanes), over these steps; "flow" also ``sum_flow``, the exact sums of
        round(g(u_i) 2^FLOW_BITS) (Python integers, object array); "seen" only tracks the levels reached;
        "meet"/"meet_unordered" update ``meet = (D, T)`` (physical lane order, device arrays)
        and stop once every active lane has met. ``active``: physical bool mask (see
        :meth:`mask`); inactive lanes do not move and their random state does not advance.
        Returns a dict with "sum_u"/"sum_busy" (physical lanes), "meet", "frames"
        (list of (chains, levels+1, lanes) host arrays, physical lanes).
        """
        active = self.active if active is None else active
        with jax.enable_x64(True):
            act = self._put(active)
        out: dict = {"frames": []}
        sums = observe in ("sums", "flow")
        if sums:
            sum_u = np.zeros((self.levels + 1, self.width), np.int64)
            sum_busy = np.zeros((self.levels + 1, self.width), np.int64)
            sum_flow = np.zeros((self.levels + 1, self.width), object) if observe == "flow" else None
        done = 0
        total = steps * max(frames, 1)
        while done < total:
            if frames:
                every = steps
                per = max(1, min(2**25 // max(1, every * self.width * (self.levels + 1) * self.chains), 4096))
                per = 1 << (per.bit_length() - 1)  # few distinct frame counts: few compiles
                # never past the last frame: the levels reached must be those of the run
                m, nf = every, min(per, frames - len(out["frames"]))
            else:
                g = group_width(self.per_device, self.levels, self.chains, observe, self.integer)
                m, nf = min(total - done, self.chunk_steps(block_length(g, self.integer))), 0
            while True:
                with jax.enable_x64(True):
                    if sums:
                        obs = (self._put(np.zeros((self.levels + 1, self.width), np.int64)),
                               self._put(np.zeros((self.levels + 1, self.width), np.int32)))
                        if observe == "flow":
                            obs += (self._put(np.zeros((self.levels + 1, self.width), np.int64)),)
                    elif observe == "seen":
                        obs = (self._put(np.zeros((self.levels + 1, self.width), bool)),)
                    else:
                        obs = meet
                    state, obs_out, us = self._call(obs, act, self.t, m, observe, nf)
                if self.capacity or not _sharding.any_true(state.overflow):  # one global reduction:
                    break  # every process agrees
                self._grow()  # an arrival would pass the cap: more levels, rerun the chunk
                if sums:
                    sum_u, sum_busy = pad_levels(sum_u, self.levels + 1), pad_levels(sum_busy,
                                                                                     self.levels + 1)
                    if sum_flow is not None:
                        sum_flow = pad_levels(sum_flow, self.levels + 1)
                out["frames"] = [pad_levels(f, self.levels + 1, axis=1) for f in out["frames"]]
            self.state = state
            if sums:
                su, sb = (_sharding.gather(a) for a in obs_out[:2])
                sum_u += su
                sum_busy += sb
                self.seen |= sb > 0
                if sum_flow is not None:
                    sum_flow += _sharding.gather(obs_out[2]).astype(object)
            elif observe == "seen":
                self.seen |= _sharding.gather(obs_out[0])
            else:
                meet = obs_out
                met_at = _sharding.gather(meet[1])  # every process decides from the same gathered T
                self.bar.set_postfix(met=f"{int(np.sum(self.lanes_of(met_at) >= 0))}/{self.lanes}")
            if frames:
                take = min(nf, frames - len(out["frames"]))
                out["frames"].extend(_sharding.gather(us)[:take])
                done += take * m
                self.t += take * m
                self.bar.update(take * m)
            else:
                done += m
                self.t += m
                self.bar.update(m)
                if observe.startswith("meet") and not np.any(active & (met_at < 0)):
                    break
        if sums:
            out.update(sum_u=sum_u, sum_busy=sum_busy)
            if sum_flow is not None:
                out["sum_flow"] = sum_flow
        if meet is not None:
            out["meet"] = meet
        return out

    def peak(self) -> np.ndarray:
        """Per logical lane, the longest queue length any chain has reached (from the start)."""
        s = self.lanes_of(self.seen)
        return np.where(s.any(axis=0), s.shape[0] - 1 - np.argmax(s[::-1], axis=0), 0)

    def counts(self) -> np.ndarray:
        """Final counts, shape (chains, levels+1, lanes), int64, logical lanes."""
        return self.lanes_of(self.state.u).astype(np.int64)

    def rng(self) -> np.ndarray:
        """Final random states, shape (lanes,) uint64, logical lanes."""
        return self.lanes_of(self.state.rng)

    def lost(self) -> np.ndarray:
        """Per logical lane, the steps since the start (or the last growth) at which an arrival
        of some chain found its queue full; with ``capacity`` and one chain: the lost arrivals."""
        return self.lanes_of(self.state.overflow).astype(np.int64)

    def close(self) -> None:
        self.bar.close()
