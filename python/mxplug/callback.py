"""callback — mx.callback: Speedometer (batch-end), do_checkpoint (epoch-end),
log_train_metric.  Same call signatures as MXNet's (BatchEndParam)."""
import logging
import time
from collections import namedtuple

BatchEndParam = namedtuple("BatchEndParam", ["epoch", "nbatch", "eval_metric", "locals"])


class Speedometer:
    """Logs samples/s and the metric every `frequent` batches."""

    def __init__(self, batch_size, frequent=50, auto_reset=True):
        self.batch_size, self.frequent, self.auto_reset = batch_size, frequent, auto_reset
        self.init = False
        self.tic = 0
        self.last_count = 0
        self.last_speed = None

    def __call__(self, param):
        count = param.nbatch
        if self.last_count > count:
            self.init = False
        self.last_count = count
        if self.init:
            if count % self.frequent == 0:
                elapsed = max(time.time() - self.tic, 1e-9)
                self.last_speed = self.frequent * self.batch_size / elapsed
                msg = "Epoch[%d] Batch [%d]\tSpeed: %.2f samples/sec" % (param.epoch, count, self.last_speed)
                if param.eval_metric is not None:
                    for name, value in param.eval_metric.get_name_value():
                        msg += "\t%s=%f" % (name, value)
                    if self.auto_reset:
                        param.eval_metric.reset()
                logging.info(msg)
                self.tic = time.time()
        else:
            self.init = True
            self.tic = time.time()


def do_checkpoint(prefix, period=1):
    """Epoch-end callback saving PREFIX-symbol.json and PREFIX-%04d.params every `period` epochs."""
    from .model import save_checkpoint
    period = int(max(1, period))

    def _callback(iter_no, sym, arg, aux):
        if (iter_no + 1) % period == 0:
            save_checkpoint(prefix, iter_no + 1, sym, arg, aux)
    return _callback


def log_train_metric(period, auto_reset=False):
    def _callback(param):
        if param.nbatch % period == 0 and param.eval_metric is not None:
            for name, value in param.eval_metric.get_name_value():
                logging.info("Iter[%d] Batch[%d] Train-%s=%f", param.epoch, param.nbatch, name, value)
            if auto_reset:
                param.eval_metric.reset()
    return _callback
