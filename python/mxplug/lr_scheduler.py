"""lr_scheduler — mx.lr_scheduler: FactorScheduler, MultiFactorScheduler.

The schedule is the runtime's (mxp_lr_schedule): a pure function of the
update count, so sched(num_update) here equals what an optimizer using it
applies.  An optimizer gets its own C copy (_make).
"""
import ctypes

from ._lib import lib
from .base import check


class LRScheduler:
    def __init__(self, base_lr=0.01):
        self.base_lr = base_lr

    def __call__(self, num_update):
        h = self._make()
        try:
            return lib.mxp_lr_schedule_lr(h, float(self.base_lr), int(num_update))
        finally:
            lib.mxp_lr_schedule_free(h)


class FactorScheduler(LRScheduler):
    def __init__(self, step, factor=1, stop_factor_lr=1e-8, base_lr=0.01):
        super().__init__(base_lr)
        if step < 1:
            raise ValueError("FactorScheduler: step must be >= 1, got %r" % (step,))
        if factor > 1.0:
            raise ValueError("FactorScheduler: factor must be <= 1, got %r" % (factor,))
        self.step, self.factor, self.stop_factor_lr = int(step), float(factor), float(stop_factor_lr)

    def _make(self):
        out = ctypes.c_void_p()
        check(lib.mxp_lr_schedule_factor(self.step, self.factor, self.stop_factor_lr, ctypes.byref(out)))
        return out.value


class MultiFactorScheduler(LRScheduler):
    def __init__(self, step, factor=1, base_lr=0.01):
        super().__init__(base_lr)
        step = [int(s) for s in step]
        if any(b <= a for a, b in zip(step, step[1:])) or (step and step[0] < 1):
            raise ValueError("MultiFactorScheduler: steps must be increasing and >= 1, got %r" % (step,))
        self.step, self.factor = step, float(factor)

    def _make(self):
        out = ctypes.c_void_p()
        arr = (ctypes.c_int64 * max(len(self.step), 1))(*self.step)
        check(lib.mxp_lr_schedule_multi_factor(len(self.step), arr, self.factor, ctypes.byref(out)))
        return out.value
