"""Long float sums in blocks, with the blocks' totals added pairwise (a binary cascade).

A reduction kept in registers along the innermost loop (lower_fused.py) whose loop is longer
than BLOCK iterations runs as a loop over blocks: inside a block the accumulators start from
the identity and add as before (reassociated, so the vectoriser spreads them over vector lanes
and unrolled copies: each accumulator adds at most BLOCK / lanes terms); each block's total is
then pushed onto a `Cascade`, which adds it pairwise with earlier totals, the way a binary
counter carries: `levels[k]` holds the sum of 2^k consecutive blocks, and pushing block j
adds the levels of the bits j carries through. Every addition in the cascade combines two sums
of equally many blocks, so the rounding error of a sum of n terms is bounded by about
(BLOCK / lanes + log2(n / BLOCK)) * eps * sum(|x|), against n / lanes * eps for one serial pass
(float32 with 16 accumulators stalls at 2^24 per lane, and loses 1e-3 of a sum of 10^7 values
around 1000). NumPy's pairwise sum has the same shape of bound (blocks of 128).

`blocked_loop` emits the loop over blocks; reductions whose combination is exact (max, min,
the integer and boolean ones) just combine the blocks' results in order.
"""
import llvmlite.ir as ir

from . import ltypes as T
from .loops import counted_loop

BLOCK = 2048           # iterations of the innermost loop summed before a cascade step
LEVELS = 64            # enough for 2^64 blocks


class Cascade:
    """The pending pairwise sums of a reduction's block totals (`levels`, an array on the
    stack of the function being emitted) and the rule adding two of them."""

    def __init__(self, builder, ty, add):
        self.add = add
        with builder.goto_entry_block():
            self.levels = builder.alloca(ir.ArrayType(ty, LEVELS), name="cascade")

    def _level(self, builder, k):
        return builder.gep(self.levels, [T.i64(0), k], inbounds=True)

    def push(self, builder, block_index, value):
        """Add the total of block number `block_index` (0-based, an i64 value)."""
        pre = builder.block
        func = builder.function
        head = func.append_basic_block("cascade.carry")
        body = func.append_basic_block("cascade.add")
        done = func.append_basic_block("cascade.store")
        builder.branch(head)
        builder.position_at_end(head)
        carry = builder.phi(T.I64, name="carry")
        level = builder.phi(T.I64, name="level")
        total = builder.phi(value.type, name="total")
        carry.add_incoming(block_index, pre)
        level.add_incoming(T.i64(0), pre)
        total.add_incoming(value, pre)
        odd = builder.trunc(carry, ir.IntType(1))
        builder.cbranch(odd, body, done)
        builder.position_at_end(body)
        summed = self.add(builder, builder.load(self._level(builder, level)), total)
        carry.add_incoming(builder.lshr(carry, T.i64(1)), body)
        level.add_incoming(builder.add(level, T.i64(1)), body)
        total.add_incoming(summed, body)
        builder.branch(head)
        builder.position_at_end(done)
        builder.store(total, self._level(builder, level))

    def total(self, builder, blocks):
        """The sum of the first `blocks` (a Python int) pushed totals: the set bits of
        `blocks` name the levels still pending; the smaller sums are added first."""
        levels = [k for k in range(blocks.bit_length()) if blocks >> k & 1]
        acc = builder.load(self._level(builder, T.i64(levels[0])))
        for k in levels[1:]:
            acc = self.add(builder, acc, builder.load(self._level(builder, T.i64(k))))
        return acc


def blocked_loop(builder, count, body, inits, combine, cascaded, name="i"):
    """`for i in range(count)` (`count` a Python int) as blocks of BLOCK iterations and a
    tail. `body(builder, i, carried) -> carried` as for loops.counted_loop, but every block
    starts its carried values from `inits`; `combine(builder, slot, a, b)` combines two results
    of carried slot `slot`. The slots in `cascaded` (float sums) add their block totals through
    a Cascade; the others combine them in order. The final carried values."""
    blocks, tail = divmod(count, BLOCK)
    cascades = {k: Cascade(builder, inits[k].type, lambda b, x, y, k=k: combine(b, k, x, y))
                for k in cascaded}

    def run_block(b, start, size, carried, block_index):
        results = counted_loop(
            b, size, lambda b2, i, acc: body(b2, b2.add(start, i, flags=("nsw",)), acc),
            inits, name)
        out = []
        for k, (before, result) in enumerate(zip(carried, results)):
            if k in cascades:
                cascades[k].push(b, block_index, result)
                out.append(before)
            else:
                out.append(combine(b, k, before, result))
        return out

    carried = counted_loop(
        builder, blocks,
        lambda b, j, acc: run_block(b, b.mul(j, T.i64(BLOCK), flags=("nsw",)), BLOCK, acc, j),
        inits, f"{name}.block")
    if tail:
        carried = run_block(builder, T.i64(blocks * BLOCK), tail, carried, T.i64(blocks))
    pushed = blocks + (1 if tail else 0)
    return [cascades[k].total(builder, pushed) if k in cascades else value
            for k, value in enumerate(carried)]
