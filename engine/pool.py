"""A pool of decoder rows: many searches, each with its own rows, decoded by one step at a time.

Every search in the pool (a ``Member``: one sub-batch's beam search or forced decoding, written as
``engine.decoder.Steps``) owns some of its rows and sentence slots. One step of the pool runs the
decoder (the step graph as ``engine.pool_graph`` edits it) over every live row at once, whatever
search it belongs to and however far along it is:

- **Rows.** Each layer's self-attention keys and values are one preallocated buffer (R, H, W, Dh)
  per layer, written in place: a step's attention (``GroupQueryAttention``) reads each of rows
  [0, N) as it lies, up to the row's own length, and writes the new position's keys and values at
  that length into the same memory (io binding). Rows have their own lengths and positions, so a
  search can join while others are halfway through theirs.
- **Reordering.** A beam search's selection moves a row's cache only where its parent changed,
  and only up to its length; rows that leave are filled by the last live rows, so live rows stay
  packed in [0, N) and free capacity costs no compute.
- **Slots.** A sentence's source side (cross-attention keys and values, (H, S, Dh) per layer, and
  its mask) is written once, when its search joins, into a slot padded to the pool's source width
  with the mask; any number of rows read a slot (a beam, or forced decoding's several
  translations of one sentence).
- **Widths.** The cache's W is the model's positions, the most any row can hold, from the
  start: its memory is anonymous pages the kernel commits as the rows first write them (no huge
  pages), so a row costs the positions it has reached, rounded to a page, and the buffer is never
  copied to grow. A row reads only its own positions, so W costs no compute either. The pages go
  back once the pool has been empty a while (``release``). The source's S grows by buckets and
  shrinks when the widest sentence leaves; what a row reads past its sentence's length weighs
  exactly 0. A sentence gets the same translation and scores alone as beside any others
  (tests/engine/test_pool.py, tests/engine/test_translator.py).

With ``PoolConfig.fixed_shapes`` the step runs at a few fixed shapes, captured as CUDA graphs where
its session has them on (``engine.captured_step``): the blocks then start at the configured rows,
source widths go by powers of two, and blocks only grow, since a captured step is bound to them.

The pool decides which rows and slots move where; its storage holds the blocks and moves them
(``engine.pool_storage``): numpy arrays in the host's memory, as described above, or, on CUDA,
float16 caches in the GPU's. The pool does no scheduling (``engine.pool_scheduler`` decides who
joins and when) and no threading: it is driven by one thread.

Shape legend: N live rows, R rows allocated, B a member's sentences, Bs live slots, H heads, W
cached positions allocated, S source positions, Dh head size, L decoder layers, V vocabulary, C
best tokens per row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnxruntime as ort

from engine.captured_step import Blocks, CapturedStep, power_of_two
from engine.decoder import Selection, Step, StepRequest, Steps
from engine.pool_graph import POSITIONS, QUERY_SLOTS, ROW_SLOTS, TOTAL_LENGTH, present_output
from engine.pool_storage import HostStorage, Storage
from engine.runner import DecoderShape, Vocabulary, top_k
from engine.shortlist import VOCAB_IDS
from engine.step_head import ALL_LOG_PROBS


@dataclass(frozen=True)
class PoolConfig:
    # rows the large members hold together at most (small ones have a reserve beyond it: engine.pool_scheduler);
    # a member larger than that runs without other large ones
    rows: int = 128
    positions: int = 256  # W: the most positions a row can cache (the model's positions)
    source_bucket: int = 8  # source positions are allocated by this many
    # The step at a few fixed shapes (engine.captured_step), captured as CUDA graphs where the session
    # has them on: blocks of ``rows`` rows from the start, source widths by powers of two, and blocks
    # that only grow, since a captured step is bound to their addresses
    fixed_shapes: bool = False


@dataclass(eq=False)
class Member:
    """One search in the pool: its steps, and the rows and slots it holds."""

    steps: Steps
    alignments: bool  # it reads the step's cross-attention
    vocab_ids: np.ndarray | None  # the shortlist it scores over; None: all V
    on_done: Callable[[object, BaseException | None], None] | None = None  # its result, or what it raised
    rows: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))  # (n,) its rows in the pool
    slots: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))  # (B',) each sentence's slot
    request: StepRequest | None = None  # its next step
    source_width: int = 0  # S of its widest sentence


class RowPool:
    """The rows and slots of every member, and the step that decodes them all (module docstring).
    ``session``: the decoder step edited by ``engine.pool_graph.with_pool_inputs``; ``storage``:
    where the caches and slots are kept (``engine.pool_storage``; the host's memory by default)."""

    def __init__(
        self, session: ort.InferenceSession, shape: DecoderShape, config: PoolConfig, storage: Storage | None = None
    ) -> None:
        self.session, self.shape, self.config = session, shape, config
        self.storage = storage or HostStorage()
        self.members: list[Member] = []
        self.cache_names = shape.names  # the layers' keys, then their values
        self.present_names = [present_output(name) for name in self.cache_names]
        self.cross_names = [i.name for i in session.get_inputs() if i.name.startswith("cross_")]
        self.takes_vocab_ids = VOCAB_IDS in {i.name for i in session.get_inputs()}
        self.chunked_head = ALL_LOG_PROBS in {i.name for i in session.get_inputs()}
        if config.fixed_shapes and self.takes_vocab_ids:
            raise ValueError("a pool of fixed shapes scores the whole vocabulary: load its step without a shortlist")
        places = config.rows if config.fixed_shapes else 0  # rows (and slots) allocated at first
        self.n = 0  # live rows
        self.n_slots = 0  # live slots
        self.row_owner: list[Member | None] = [None] * places
        self.slot_owner: list[Member | None] = []
        self.lengths = np.zeros(places, dtype=np.int64)  # (R,) cached positions of each row
        # One block for every layer's keys and values, so that moving a row is one copy: (2L, R, H, W, Dh),
        # of the type the step's attention reads its cache in
        cache_type = _ELEMENTS[next(i.type for i in session.get_inputs() if i.name == self.cache_names[0])]
        rows = (len(self.cache_names), places, shape.heads, config.positions, shape.d_head)
        self.cache = self.storage.empty(rows, cache_type)
        self.cross = self.storage.empty((len(self.cross_names), 0, shape.heads, 0, shape.d_head), np.float32)
        self.src_mask = np.zeros((0, 0), dtype=bool)  # (Bs, S)
        self._allocate_slots(places, self._source_allocation(0))
        self.captured = (
            CapturedStep(session, self.storage, self.cache_names, self.present_names, self.cross_names)
            if config.fixed_shapes
            else None
        )

    @property
    def rows_held(self) -> int:
        return self.n

    @property
    def width(self) -> int:
        """W: cached positions allocated."""
        return self.cache.shape[3]

    @property
    def source_width(self) -> int:
        return self.src_mask.shape[1]

    # -- joining and leaving ----------------------------------------------------------------

    def join(self, member: Member, source: dict[str, np.ndarray]) -> None:
        """Give ``member`` a slot per sentence of ``source`` (its sentences as encoded: (B, H, S,
        Dh) per layer, src_mask (B, S)) and a row per sentence, and its first request; ``on_done``
        is called at once if its steps end or fail before any step. The slots are the only copy of
        the source the pool keeps."""
        member.source_width = source["src_mask"].shape[1]
        member.slots = self._write_slots(member, source)
        member.rows = self._take_rows(member, len(member.slots))
        self.members.append(member)
        self._advance(member, None)

    def extend(self, member: Member, source: dict[str, np.ndarray], rows: int) -> None:
        """Sentences that join ``member``'s search between steps (``engine.beam_search.JoinableSearch``):
        a slot each, written from ``source`` as ``join`` writes them, and ``rows`` rows after the
        member's own. The member's request must then be asked again, for them too."""
        member.slots = np.concatenate([member.slots, self._write_slots(member, source)])
        member.rows = np.concatenate([member.rows, self._take_rows(member, rows)])
        member.source_width = max(member.source_width, source["src_mask"].shape[1])

    def apply(self, member: Member, selection: Selection) -> None:
        """A selection ``member``'s search made between steps (sentences it dropped)."""
        self._select(member, selection)

    def _write_slots(self, member: Member, source: dict[str, np.ndarray]) -> np.ndarray:
        """A slot for each sentence of ``source``, holding its cross-attention keys and values."""
        sentences, width = source["src_mask"].shape
        if width > self.source_width:
            self._allocate_slots(len(self.slot_owner), self._source_allocation(width))
        slots = self._take_slots(member, sentences)
        start = int(slots[0])  # new slots are the next ones in order
        taken = slice(start, start + sentences)
        self.storage.write(self.cross, start, [source[name] for name in self.cross_names])
        self.src_mask[taken, :width] = source["src_mask"]
        self.src_mask[taken, width:] = False
        return slots

    def remove(self, member: Member, error: BaseException) -> None:
        """Stop ``member`` (cancelled): its rows and slots are freed, its steps closed."""
        if member in self.members:
            member.steps.close()
            self._leave(member, None, error)

    def _leave(self, member: Member, result: object, error: BaseException | None) -> None:
        self.members.remove(member)
        self._free_rows(member.rows)
        self._free_slots(np.unique(member.slots).tolist())
        member.rows, member.slots = member.rows[:0], member.slots[:0]
        self._shrink()
        if member.on_done is not None:
            member.on_done(result, error)

    def _advance(self, member: Member, step: Step | None) -> None:
        """Send ``member`` its step's outputs (None: start it) and take its next request."""
        try:
            request = next(member.steps) if step is None else member.steps.send(step)
        except StopIteration as done:
            self._leave(member, done.value, None)
            return
        except Exception as e:  # a search's own error fails its member, not the pool
            self._leave(member, None, e)
            return
        member.request = request
        if request.selection is not None:
            self._select(member, request.selection)

    # -- one step -----------------------------------------------------------------------------

    def step(self) -> None:
        """Decode one step of every member's rows and hand each its outputs."""
        members = list(self.members)  # each has its next request: members that end leave at once
        if not members:
            return
        n = self.n
        if int(self.lengths[:n].max(initial=0)) >= self.width:  # the searches' length caps keep within it
            raise ValueError(f"a row is past the pool's {self.width} positions")
        tokens = np.empty(n, dtype=np.int64)
        requests = []
        for m in members:
            assert m.request is not None
            tokens[m.rows] = m.request.tokens
            requests.append(m.request)
        candidates = max(r.candidates for r in requests)
        full = any(r.full for r in requests)
        alignments = any(m.alignments for m in members)
        vocabulary = self._vocabulary(members)
        feed = self._feed(tokens, top_k(candidates, vocabulary.width), vocabulary)
        if self.chunked_head:
            feed[ALL_LOG_PROBS] = np.array(full)
        k = int(feed["candidates"][0])
        outputs = {
            "top_log_probs": np.empty((n, k), dtype=np.float32),
            "top_ids": np.empty((n, k), dtype=np.int64),
        }
        if alignments:
            outputs["alignment"] = np.empty((n, self.source_width), dtype=np.float32)
        if full:
            outputs["log_probs"] = np.empty((n, vocabulary.width), dtype=np.float32)
        self._run(feed, outputs)
        self.lengths[:n] += 1
        log_probs = vocabulary.widen(outputs["log_probs"]) if full else None
        # Each member's rows as the step saw them: a member that moves on may move others' rows.
        stepped = [(m, m.rows.copy(), request) for m, request in zip(members, requests, strict=True)]
        for m, r, request in stepped:
            m.request = None
            step = Step(
                log_probs[r] if request.full and log_probs is not None else None,
                outputs["top_log_probs"][r, : request.candidates],
                outputs["top_ids"][r, : request.candidates],
                outputs["alignment"][r, : m.source_width] if m.alignments else None,
            )
            self._advance(m, step)

    def _run(self, feed: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> None:
        """One run of the step: each layer's buffer bound as its cache input and as the output
        with the new position written in (the same memory, so the cache is never copied), the
        other inputs as they are, and ``outputs`` written into the arrays given (of the shapes the
        step returns: no output is copied or wrapped after the run)."""
        if self.captured is not None:
            blocks = Blocks(self.cache, self.cross, self.n, self.n_slots, len(self.lengths), len(self.slot_owner))
            self.captured.run(feed, outputs, blocks)
            return
        binding = self.session.io_binding()
        for name, value in feed.items():
            binding.bind_cpu_input(name, value)
        self.storage.bind(binding, self.cross_names, self.cross, self.n_slots)
        self.storage.bind(binding, self.cache_names, self.cache, self.n, self.present_names)
        for name, value in outputs.items():
            binding.bind_output(name, "cpu", 0, value.dtype, list(value.shape), value.ctypes.data)
        self.session.run_with_iobinding(binding)

    def _vocabulary(self, members: list[Member]) -> Vocabulary:
        """The pieces this step scores: the union of the members' shortlists, or all V if one
        scores all."""
        lists = [m.vocab_ids for m in members]
        ids = None if any(v is None for v in lists) else np.unique(np.concatenate(lists))  # type: ignore[arg-type]
        return Vocabulary(self.shape.vocab, ids, self.takes_vocab_ids)

    def _feed(self, tokens: np.ndarray, candidates: np.ndarray, vocabulary: Vocabulary) -> dict[str, np.ndarray]:
        lengths = self.lengths[: self.n]
        query_slots, row_slots = self._slot_layout()
        feed = {
            "tokens": tokens[:, None],
            "candidates": candidates,
            POSITIONS: lengths.copy(),
            # the longest row with its new position; with fixed shapes the width, which stays
            TOTAL_LENGTH: np.array(
                self.width if self.config.fixed_shapes else int(lengths.max(initial=0)) + 1, dtype=np.int32
            ),
            QUERY_SLOTS: query_slots,
            ROW_SLOTS: row_slots,
            "src_mask": self.src_mask[: self.n_slots],
        }
        return feed | vocabulary.feed()

    def _slot_layout(self) -> tuple[np.ndarray, np.ndarray]:
        """Where each slot's queries come from and each row's answer goes: ``query_slots``
        (Bs * R,), each slot's R rows, padded with row 0, and ``row_slots`` (N,). A member's rows
        are shared out evenly among its sentences, in order (``engine.decoder.Decoder``'s
        convention), unless its request says whose each row is (``StepRequest.row_sentences``)."""
        n = self.n
        row_slot = np.empty(n, dtype=np.int64)
        for m in self.members:
            sentences = m.request.row_sentences if m.request is not None else None
            if sentences is not None:
                row_slot[m.rows] = m.slots[sentences]
            else:
                row_slot[m.rows] = np.repeat(m.slots, len(m.rows) // max(len(m.slots), 1))
        counts = np.bincount(row_slot, minlength=self.n_slots)
        # At least 2 queries a slot: a product with one row takes another kernel, which rounds
        # differently, and a sentence's first step would depend on whether beams shared it.
        R = max(2, int(counts.max(initial=1)))
        order = np.argsort(row_slot, kind="stable")
        starts = np.cumsum(counts) - counts
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n) - starts[row_slot[order]]
        row_slots = row_slot * R + rank
        query_slots = np.zeros(self.n_slots * R, dtype=np.int64)
        query_slots[row_slots] = np.arange(n)
        return query_slots, row_slots

    # -- rows -------------------------------------------------------------------------------------

    def _take_rows(self, member: Member, count: int) -> np.ndarray:
        needed = self.n + count
        if needed > len(self.lengths):
            self._allocate_rows(max(needed, 2 * len(self.lengths)))
        rows = np.arange(self.n, needed)
        self.lengths[rows] = 0  # what its buffer holds is never read: each step writes where it reads next
        self.row_owner[self.n : needed] = [member] * count
        self.n = needed
        return rows

    def _select(self, member: Member, selection: Selection) -> None:
        """Apply a search's selection to its rows: new row i continues old row ``rows[i]``. A row
        continued once keeps its cache where it is; only a second (third...) continuation of a
        row copies it, into a row no longer continued or a new one."""
        old = member.rows
        sources = old[selection.rows]  # (n',) the row each new row continues
        order = np.argsort(sources, kind="stable")
        repeated = np.zeros(len(sources), dtype=bool)
        repeated[1:] = sources[order[1:]] == sources[order[:-1]]
        copies = np.sort(order[repeated])  # new rows that continue a row an earlier one continues
        continued = np.zeros(len(self.lengths), dtype=bool)
        continued[sources] = True
        spare = old[~continued[old]]  # rows nothing continues
        if len(copies) > len(spare):
            spare = np.concatenate([spare, self._take_rows(member, len(copies) - len(spare))])
        rows = sources.copy()
        if len(copies):
            dst, src = spare[: len(copies)], sources[copies]
            self._copy_rows(dst, src)
            rows[copies] = dst
        member.rows = rows
        self._free_rows(spare[len(copies) :])
        if selection.sentences is not None:
            kept = member.slots[selection.sentences]
            # As sets (sentences may share a slot): np.setdiff1d took 15 us on these few, a
            # fourteenth of the pool's Python in the service
            unused = sorted(set(member.slots.tolist()).difference(kept.tolist()))
            member.slots = kept
            self._free_slots(unused)
        self._shrink()

    def _copy_rows(self, dst: np.ndarray, src: np.ndarray) -> None:
        """Rows ``src``'s caches into rows ``dst`` (none of them among ``src``), each up to its length."""
        self.storage.move(self.cache, dst.tolist(), src.tolist(), self.lengths[src].tolist())
        self.lengths[dst] = self.lengths[src]

    def _free_rows(self, rows: np.ndarray) -> None:
        """Free ``rows``; the last live rows move into those below the new end."""
        holes, movers = _fill_holes(self.row_owner, rows.tolist(), self.n, "rows")
        if holes:
            self._copy_rows(np.array(holes), np.array(movers))
        self.n -= len(rows)

    def _allocate_rows(self, rows: int) -> None:
        """A block of ``rows`` rows, the live rows' caches copied in."""
        longest = int(self.lengths[: self.n].max(initial=0))  # a row reads nothing past its length
        self.cache = self.storage.resized(self.cache, rows, self.width, self.n, longest)
        lengths = np.zeros(rows, dtype=np.int64)
        lengths[: self.n] = self.lengths[: self.n]
        self.lengths = lengths
        self.row_owner = self.row_owner[: self.n] + [None] * (rows - self.n)

    # -- slots ------------------------------------------------------------------------------------

    def _take_slots(self, member: Member, count: int) -> np.ndarray:
        needed = self.n_slots + count
        if needed > len(self.slot_owner):
            self._allocate_slots(max(needed, 2 * len(self.slot_owner)), self.source_width)
        slots = np.arange(self.n_slots, needed)
        self.slot_owner[self.n_slots : needed] = [member] * count
        self.n_slots = needed
        return slots

    def _free_slots(self, slots: list[int]) -> None:
        """Free ``slots``; the last live slots move into those below the new end."""
        holes, movers = _fill_holes(self.slot_owner, slots, self.n_slots, "slots")
        if holes:
            self.storage.move(self.cross, holes, movers)
            self.src_mask[holes] = self.src_mask[movers]
        self.n_slots -= len(slots)

    def _allocate_slots(self, slots: int, width: int) -> None:
        """Slots of ``width`` source positions, the live slots copied in."""
        keep = min(width, self.source_width)
        src_mask = np.zeros((slots, width), dtype=bool)
        src_mask[: self.n_slots, :keep] = self.src_mask[: self.n_slots, :keep]
        self.cross = self.storage.resized(self.cross, slots, width, self.n_slots, keep)
        self.src_mask = src_mask
        self.slot_owner = self.slot_owner[: self.n_slots] + [None] * (slots - self.n_slots)

    def _longest_source(self) -> int:
        return max((m.source_width for m in self.members), default=0)

    def _source_allocation(self, width: int) -> int:
        """The source positions slots are allocated with to hold ``width``."""
        if self.config.fixed_shapes:
            return power_of_two(max(width, self.config.source_bucket))
        return _round_up(width, self.config.source_bucket)

    # -- shrinking ----------------------------------------------------------------------------

    def release(self) -> None:
        """Give every page of an empty pool's cache back (its scheduler calls this once the pool
        has been idle a while): fresh buffers, committed again as rows write them. Freed rows keep
        their lengths until then, which says whether there are pages to give back."""
        if self.n == 0 and self.lengths.any() and not self.config.fixed_shapes:
            self._allocate_rows(min(len(self.lengths), self.config.rows))

    def _shrink(self) -> None:
        """Give back what the live rows no longer need: rows allocated past twice the configured
        rows, and source width."""
        if self.config.fixed_shapes:  # blocks only grow (PoolConfig)
            return
        rows = len(self.lengths)
        rows_wanted = max(self.config.rows, _round_up(self.n, self.config.rows))
        if rows > 2 * rows_wanted:
            self._allocate_rows(rows_wanted)
        source_needed = self._source_allocation(self._longest_source())
        if self.source_width > source_needed:
            self._allocate_slots(len(self.slot_owner), source_needed)


def _fill_holes(owners: list[Member | None], freed: list[int], live: int, indices: str) -> tuple[list[int], list[int]]:
    """Free the places ``freed`` among the first ``live`` of ``owners`` (rows or slots): the last
    live places move into those below the new end, their owners' ``indices`` ("rows", "slots")
    following; (holes, movers), the places whose contents the caller moves."""
    for place in freed:
        owners[place] = None
    end = live - len(freed)
    holes = [place for place in freed if place < end]
    movers = [place for place in range(end, live) if owners[place] is not None]
    for hole, mover in zip(holes, movers, strict=True):
        owner = owners[mover]
        assert owner is not None
        held = getattr(owner, indices)
        held[held == mover] = hole
        owners[hole], owners[mover] = owner, None
    return holes, movers


# The onnxruntime element types a step's cache can be in
_ELEMENTS = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


def _round_up(n: int, bucket: int) -> int:
    return max(bucket, -(-n // bucket) * bucket)
