"""gluon.loss — SoftmaxCrossEntropyLoss and L2Loss, per sample (batch,) as
MXNet's Gluon, built from registered ops (log_softmax, one_hot, sum, mean,
square) so they run imperatively, under autograd, and traced."""
from .block import HybridBlock


class Loss(HybridBlock):
    def __init__(self, weight=None, batch_axis=0, prefix=None, params=None):
        super().__init__(prefix, params)
        self._weight, self._batch_axis = weight, batch_axis

    def __call__(self, pred, label, *args):
        from .. import symbol as sym
        F = sym if isinstance(pred, sym.Symbol) else _nd()
        return self.hybrid_forward(F, pred, label, *args)


def _nd():
    from .. import ndarray
    return ndarray


class SoftmaxCrossEntropyLoss(Loss):
    def __init__(self, axis=-1, sparse_label=True, from_logits=False, weight=None, batch_axis=0, prefix=None,
                 params=None):
        super().__init__(weight, batch_axis, prefix, params)
        self._axis, self._sparse, self._from_logits = axis, sparse_label, from_logits

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        if not self._from_logits:
            pred = F.log_softmax(pred, axis=self._axis)
        if self._sparse:
            if isinstance(pred, _nd().NDArray):
                depth = pred.shape[self._axis]
            else:
                raise NotImplementedError("SoftmaxCrossEntropyLoss: traced sparse labels need the class count")
            label = F.one_hot(label, depth=depth)
        loss = -F.sum(pred * label, axis=self._axis)
        if sample_weight is not None:
            loss = loss * sample_weight
        if self._weight is not None:
            loss = loss * self._weight
        return loss


SoftmaxCELoss = SoftmaxCrossEntropyLoss


class L2Loss(Loss):
    def __init__(self, weight=1.0, batch_axis=0, prefix=None, params=None):
        super().__init__(weight, batch_axis, prefix, params)

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        diff = F.square(pred - label.reshape(pred.shape))
        if sample_weight is not None:
            diff = diff * sample_weight
        flat = diff.reshape((diff.shape[0], -1)) if diff.ndim > 1 else diff.reshape((diff.shape[0], 1))
        return F.mean(flat, axis=1) * (self._weight / 2.0)
