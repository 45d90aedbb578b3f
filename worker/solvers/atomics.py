"""Atomic operations on int64 array slots, a polite yield and a nap, and an array view at an address: what threads
that share memory inside numba kernels need to hand work to each other (``worker.solvers.smo.team``).

numba has no atomics of its own. These intrinsics emit LLVM's: an acquire load, a release store, a
compare-and-swap and a fetch-and-add, all sequentially consistent where two orders are named. They are
what C11's ``<stdatomic.h>`` compiles to, so they hold on weakly ordered processors (ARM) as well as on
x86, and the compiler may neither drop nor reorder them (a plain load in a spin loop may be hoisted out of
it). ``yield_cpu`` calls ``sched_yield`` and ``nap_ns`` ``nanosleep`` (POSIX), resolved like ``common._monotonic_ns`` when a compiled
kernel is loaded, so kernels that use these stay cacheable.

``array_at(address, length, like)`` makes a 1-d C-contiguous array of ``like``'s dtype over memory that
another thread owns (its address from ``arr.ctypes.data``): the receiving kernel does not keep it alive,
so the sender must keep the array alive until the receiver is done with it.
"""

from __future__ import annotations

from llvmlite import ir  # numba's own code generator (a numba dependency)
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _slot_pointer(context, builder, array_type, array, index):
    ary = context.make_array(array_type)(context, builder, array)
    return cgutils.get_item_pointer(context, builder, array_type, ary, [index])


def _slot_and_value(context, builder, signature, args):
    """The slot's pointer (arguments 0 and 1) and argument 2 as an int64."""
    pointer = _slot_pointer(context, builder, signature.args[0], args[0], args[1])
    return pointer, context.cast(builder, args[2], signature.args[2], types.int64)


def _check_int64_array(array):
    if not (isinstance(array, types.Array) and array.dtype == types.int64 and array.ndim == 1):
        raise TypeError(f"atomics work on 1-d int64 arrays, not {array}")


@intrinsic
def load_acquire(typingctx, array, index):
    """array[index], read with acquire order: what was written before the matching release is visible after."""
    _check_int64_array(array)

    def codegen(context, builder, signature, args):
        pointer = _slot_pointer(context, builder, signature.args[0], args[0], args[1])
        return builder.load_atomic(pointer, "acquire", 8)

    return types.int64(array, index), codegen


@intrinsic
def store_release(typingctx, array, index, value):
    """array[index] = value with release order: every earlier write is visible to an acquire load of it."""
    _check_int64_array(array)

    def codegen(context, builder, signature, args):
        pointer, v = _slot_and_value(context, builder, signature, args)
        builder.store_atomic(v, pointer, "release", 8)
        return context.get_dummy_value()

    return types.void(array, index, value), codegen


@intrinsic
def compare_and_swap(typingctx, array, index, expected, new):
    """If array[index] == expected, set it to new and return True (one thread wins); else return False."""
    _check_int64_array(array)

    def codegen(context, builder, signature, args):
        pointer, e = _slot_and_value(context, builder, signature, args)
        n = context.cast(builder, args[3], signature.args[3], types.int64)
        outcome = builder.cmpxchg(pointer, e, n, "acq_rel", "acquire")
        return builder.extract_value(outcome, 1)

    return types.boolean(array, index, expected, new), codegen


@intrinsic
def fetch_add(typingctx, array, index, value):
    """array[index] += value as one indivisible step (acquire and release); returns the value before."""
    _check_int64_array(array)

    def codegen(context, builder, signature, args):
        pointer, v = _slot_and_value(context, builder, signature, args)
        return builder.atomic_rmw("add", pointer, v, "acq_rel")

    return types.int64(array, index, value), codegen


@intrinsic
def yield_cpu(typingctx):
    """sched_yield(): let another runnable thread have this core (a spinning thread's courtesy)."""

    def codegen(context, builder, signature, args):
        function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), []), "sched_yield")
        builder.call(function, [])
        return context.get_dummy_value()

    return types.void(), codegen


@intrinsic
def nap_ns(typingctx, nanoseconds):
    """nanosleep() for about ``nanoseconds`` (below one second): an idle thread's pause between polls."""

    def codegen(context, builder, signature, args):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        timespec = ir.LiteralStructType([i64, i64])
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(i32, [timespec.as_pointer(), timespec.as_pointer()]), "nanosleep"
        )
        request = cgutils.alloca_once(builder, timespec)
        builder.store(ir.Constant(i64, 0), cgutils.gep_inbounds(builder, request, 0, 0))
        ns = context.cast(builder, args[0], signature.args[0], types.int64)
        builder.store(ns, cgutils.gep_inbounds(builder, request, 0, 1))
        builder.call(function, [request, ir.Constant(timespec.as_pointer(), None)])
        return context.get_dummy_value()

    return types.void(nanoseconds), codegen


@intrinsic
def array_at(typingctx, address, length, like):
    """A 1-d C-contiguous view of ``length`` items of ``like``'s dtype at ``address`` (owned elsewhere)."""
    if not isinstance(like, types.Array):
        raise TypeError(f"array_at needs an array to take the dtype from, not {like}")
    view_type = types.Array(like.dtype, 1, "C")

    def codegen(context, builder, signature, args):
        item_type = context.get_data_type(view_type.dtype)
        data = builder.inttoptr(args[0], item_type.as_pointer())
        view = context.make_array(view_type)(context, builder)
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(item_type))
        n = context.cast(builder, args[1], signature.args[1], types.intp)
        context.populate_array(
            view,
            data=data,
            shape=cgutils.pack_array(builder, [n]),
            strides=cgutils.pack_array(builder, [itemsize]),
            itemsize=itemsize,
            meminfo=None,
        )
        return view._getvalue()

    return view_type(address, length, like), codegen
