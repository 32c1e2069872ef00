"""Port of upstream ggml's tests/test-opt.cpp (ggml 0.15.3) to pytest, through the raw cffi binding.

Every scenario of test-opt.cpp is here with upstream's expected values and tolerances, for AdamW and SGD
wherever upstream runs it (test names carry upstream's function names):

    test_dataset                  batches and shuffling of ggml_opt_dataset, every shard/batch size
    test_grad                     gradients accumulated over 6 physical batches without an optimizer step
    test_forward_backward         forward-only results, then forward+backward (low level and ggml_opt_epoch)
    test_epoch_vs_fit             ggml_opt_epoch and ggml_opt_fit give bit-identical weights
    test_idata_split              train/eval split inside one ggml_opt_epoch
    test_gradient_accumulation    logical batch 6 as 6 x 1 or 3 x 2 physical batches (upstream) or one batch
                                  of 6 (added): same gradients, weights and loss; sum and mean (AdamW)
    test_regression               ggml_opt_fit recovers a and b of y = a*x + b + noise

The model is upstream's: outputs = scale(inputs + weights, 1), one scalar parameter `weights`, w0 = 3,
inputs 0..5, loss type SUM unless stated. Custom optimizer parameters come from ABI-mode callbacks
(`ffi.callback` returning `struct ggml_opt_optimizer_params` by value); the `extern "Python"` entry
points of the extension are left to the package.

Differences from upstream, all deliberate:
  * the scheduler holds the CPU backend once (upstream's list repeats the tested backend in front of all
    devices; with only the CPU device that is the same backend twice);
  * upstream leaks `ctx_compute` in test_regression and the graphs/buffers of ggml_opt_alloc it marks
    "leaked"; here every handle that has a free function is freed;
  * test_idata_split checks SGD with the AdamW values (upstream checks AdamW only; the values are
    identical since both optimizers step the weight by exactly -1 with the test parameters);
  * test_regression also checks SGD with a weaker, documented criterion (upstream prints OK for SGD
    unconditionally: at lr 1e-4 the intercept b cannot reach 3.4 within 900 epochs), and the
    regression data are generated with a bit-exact port of std::mt19937(12345) and libstdc++'s
    std::normal_distribution<float>, so the fit sees the same noise as the C++ test.
"""
from __future__ import annotations

import math
import os
import random

import numpy as np
import pytest

from pyggml_opt._lib import cpu_proc, ffi, lib

NE_DATAPOINT = 2
NE_LABEL = 1
NDATA = 6

ADAMW = lib.GGML_OPT_OPTIMIZER_TYPE_ADAMW
SGD = lib.GGML_OPT_OPTIMIZER_TYPE_SGD
OPTIMIZERS = [pytest.param(ADAMW, id="adamw"), pytest.param(SGD, id="sgd")]
F32 = lib.GGML_TYPE_F32
LOSS_SUM = lib.GGML_OPT_LOSS_TYPE_SUM
LOSS_MEAN = lib.GGML_OPT_LOSS_TYPE_MEAN


def almost_equal(a: float, b: float, atol: float) -> bool:
    # upstream: fabs(a - b) < atol (strict)
    return abs(a - b) < atol


# --------------------------------------------------------------------------------------------------
# Optimizer-parameter callbacks (ABI mode). An exception inside a C callback cannot propagate: cffi
# would print it and return a zeroed struct. `onerror` records it instead and a fixture fails the test.
# --------------------------------------------------------------------------------------------------
_callback_errors: list[str] = []


def _onerror(exc_type, exc_value, tb) -> None:
    _callback_errors.append(f"{exc_type.__name__}: {exc_value}")


@ffi.callback("struct ggml_opt_optimizer_params(void *)", onerror=_onerror)
def helper_get_test_opt_pars(userdata):
    # These values make it easy to check results: every step moves the weight by exactly 1.
    result = lib.ggml_opt_get_default_optimizer_params(userdata)
    result.adamw.alpha = 1.0
    result.adamw.beta1 = 0.0
    result.adamw.beta2 = 0.0
    result.adamw.eps = 0.0
    result.adamw.wd = 0.0
    result.sgd.wd = 0.0
    result.sgd.alpha = 1.0
    return result


G_SGD_LR = float(np.float32(1e-4))  # constexpr float g_sgd_lr = 1e-4f
G_SGD_EPOCHS = 900


@ffi.callback("struct ggml_opt_optimizer_params(void *)", onerror=_onerror)
def helper_get_regression_opt_pars(userdata):
    epoch = ffi.cast("int64_t *", userdata)[0]  # ggml_opt_fit passes &epoch (1-based)
    result = lib.ggml_opt_get_default_optimizer_params(ffi.NULL)
    result.adamw.alpha = 0.1
    result.sgd.alpha = G_SGD_LR * math.pow(0.99, 1000 * float(epoch) / G_SGD_EPOCHS)
    result.sgd.wd = 1e-10
    return result


@pytest.fixture(autouse=True)
def _no_callback_errors():
    _callback_errors.clear()
    yield
    assert not _callback_errors, f"exception(s) inside an optimizer-params callback: {_callback_errors}"


# --------------------------------------------------------------------------------------------------
# Backend and scheduler
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def backend():
    be = lib.ggml_backend_init_by_type(lib.GGML_BACKEND_DEVICE_TYPE_CPU, ffi.NULL)
    assert be != ffi.NULL, "no CPU backend"
    set_n_threads = cpu_proc("ggml_backend_set_n_threads", "ggml_backend_set_n_threads_t")
    if set_n_threads is not None:
        # upstream: std::thread::hardware_concurrency() / 2
        set_n_threads(be, max(1, (os.cpu_count() or 2) // 2))
    yield be
    lib.ggml_backend_free(be)


@pytest.fixture
def sched(backend):
    backends = ffi.new("ggml_backend_t[1]", [backend])
    s = lib.ggml_backend_sched_new(backends, ffi.NULL, 1, lib.GGML_DEFAULT_GRAPH_SIZE, False, True)
    assert s != ffi.NULL
    yield s
    lib.ggml_backend_sched_free(s)


# --------------------------------------------------------------------------------------------------
# Tensor helpers
# --------------------------------------------------------------------------------------------------
def host_f32(tensor, n: int) -> np.ndarray:
    """Writable numpy view of the host memory of a tensor in a CPU buffer (ggml_get_data_f32)."""
    return np.frombuffer(ffi.buffer(lib.ggml_get_data_f32(tensor), 4 * n), dtype=np.float32)


def tensor_get(tensor, n: int | None = None) -> np.ndarray:
    n = lib.ggml_nelements(tensor) if n is None else n
    out = np.empty(n, dtype=np.float32)
    lib.ggml_backend_tensor_get(tensor, ffi.from_buffer(out), 0, 4 * n)
    return out


def tensor_set(tensor, values) -> None:
    arr = np.ascontiguousarray(values, dtype=np.float32)
    lib.ggml_backend_tensor_set(tensor, ffi.from_buffer(arr), 0, arr.nbytes)


def get_scalar(tensor) -> float:
    return float(tensor_get(tensor, 1)[0])


def result_ndata(result) -> int:
    n = ffi.new("int64_t *")
    lib.ggml_opt_result_ndata(result, n)
    return int(n[0])


def result_loss(result) -> tuple[float, float]:
    loss, unc = ffi.new("double *"), ffi.new("double *")
    lib.ggml_opt_result_loss(result, loss, unc)
    return loss[0], unc[0]


def result_accuracy(result) -> tuple[float, float]:
    acc, unc = ffi.new("double *"), ffi.new("double *")
    lib.ggml_opt_result_accuracy(result, acc, unc)
    return acc[0], unc[0]


def result_values(result) -> tuple[int, float, float, float, float]:
    """(ndata, loss, loss uncertainty, accuracy, accuracy uncertainty) of a ggml_opt_result."""
    return (result_ndata(result), *result_loss(result), *result_accuracy(result))


def run_epoch(cd, loss, high_level: bool, result_train, result_eval, idata_split: int,
              shuffle: bool = False) -> list[float]:
    """One epoch over the NDATA samples: the first idata_split with a backward pass into result_train,
    the rest forward only into result_eval. high_level: ggml_opt_epoch itself (the per-sample losses
    are not recorded, NaN); else the same by hand with ggml_opt_alloc / ggml_opt_eval, recording the
    loss after each sample."""
    loss_history = [math.nan] * NDATA
    if high_level:
        if shuffle:
            lib.ggml_opt_dataset_shuffle(cd.opt_ctx, cd.dataset_unsupervised, -1)
        lib.ggml_opt_epoch(cd.opt_ctx, cd.dataset_unsupervised, result_train or ffi.NULL,
                           result_eval or ffi.NULL, idata_split, ffi.NULL, ffi.NULL)
        return loss_history
    for idata in range(NDATA):
        backward = idata < idata_split
        lib.ggml_opt_alloc(cd.opt_ctx, backward)
        tensor_set(cd.inputs, [idata])
        lib.ggml_opt_eval(cd.opt_ctx, result_train if backward else result_eval)
        loss_history[idata] = get_scalar(loss)
    return loss_history


def new_context(mem_size: int):
    params = ffi.new("struct ggml_init_params *", {"mem_size": mem_size, "mem_buffer": ffi.NULL, "no_alloc": True})
    ctx = lib.ggml_init(params[0])
    assert ctx != ffi.NULL
    return ctx


def compute_ctx_size() -> int:
    return lib.GGML_DEFAULT_GRAPH_SIZE * lib.ggml_tensor_overhead() + 3 * lib.ggml_graph_overhead()


# --------------------------------------------------------------------------------------------------
# helper_get_ctx_data / helper_free_ctx_data
# --------------------------------------------------------------------------------------------------
class CtxData:
    """Upstream's helper_ctx_data: datasets, contexts, the model, the opt context and two results."""

    def __init__(self, optim, sched, backend, init_opt_ctx=True, optimizer_defaults=True,
                 nbatch_logical=1, nbatch_physical=1, loss_type=LOSS_SUM):
        self._freed = False
        self.datasets_supervised = []
        self.dataset_unsupervised = ffi.NULL
        self.ctx_static = self.ctx_compute = ffi.NULL
        self.buf = ffi.NULL
        self.opt_ctx = ffi.NULL
        self.result = self.result2 = ffi.NULL
        try:
            self._build(optim, sched, backend, init_opt_ctx, optimizer_defaults, nbatch_logical,
                        nbatch_physical, loss_type)
        except BaseException:
            self.free()
            raise

    def _build(self, optim, sched, backend, init_opt_ctx, optimizer_defaults, nbatch_logical,
               nbatch_physical, loss_type):
        for ndata_shard in range(1, NDATA + 1):
            ds = lib.ggml_opt_dataset_init(F32, F32, NE_DATAPOINT, NE_LABEL, NDATA, ndata_shard)
            assert ds != ffi.NULL
            self.datasets_supervised.append(ds)
            data = host_f32(lib.ggml_opt_dataset_data(ds), NDATA * NE_DATAPOINT).reshape(NDATA, NE_DATAPOINT)
            labels = host_f32(lib.ggml_opt_dataset_labels(ds), NDATA * NE_LABEL).reshape(NDATA, NE_LABEL)
            idata = np.arange(NDATA)[:, None]
            data[:] = 16 * idata + np.arange(NE_DATAPOINT)[None, :]
            labels[:] = 16 * (16 * idata + np.arange(NE_LABEL)[None, :])

        self.dataset_unsupervised = lib.ggml_opt_dataset_init(F32, F32, 1, 0, NDATA, 1)
        assert self.dataset_unsupervised != ffi.NULL
        host_f32(lib.ggml_opt_dataset_data(self.dataset_unsupervised), NDATA)[:] = np.arange(NDATA)

        self.ctx_static = new_context((2 * NDATA + 2) * lib.ggml_tensor_overhead())
        self.ctx_compute = new_context(compute_ctx_size())

        self.data_batch = []
        self.labels_batch = []
        for ndata_batch in range(1, NDATA + 1):
            self.data_batch.append(lib.ggml_new_tensor_1d(self.ctx_static, F32, ndata_batch * NE_DATAPOINT))
            self.labels_batch.append(lib.ggml_new_tensor_1d(self.ctx_static, F32, ndata_batch * NE_LABEL))

        self.inputs = lib.ggml_new_tensor_1d(self.ctx_static, F32, nbatch_physical)
        lib.ggml_set_name(self.inputs, b"inputs")

        self.weights = lib.ggml_new_tensor_1d(self.ctx_static, F32, 1)
        lib.ggml_set_name(self.weights, b"weights")
        lib.ggml_set_param(self.weights)

        intermediary = lib.ggml_add(self.ctx_compute, self.inputs, self.weights)
        self.outputs = lib.ggml_scale(self.ctx_compute, intermediary, 1.0)
        lib.ggml_set_name(self.outputs, b"outputs")

        self.buf = lib.ggml_backend_alloc_ctx_tensors(self.ctx_static, backend)
        assert self.buf != ffi.NULL
        tensor_set(self.weights, [NDATA / 2])  # w0 = float(ndata)/2

        assert nbatch_logical % nbatch_physical == 0
        opt_period = nbatch_logical // nbatch_physical

        self.opt_params = lib.ggml_opt_default_params(sched, loss_type)
        self.opt_params.ctx_compute = self.ctx_compute
        self.opt_params.inputs = self.inputs
        self.opt_params.outputs = self.outputs
        self.opt_params.opt_period = opt_period
        self.opt_params.optimizer = optim
        if not optimizer_defaults:
            self.opt_params.get_opt_pars = helper_get_test_opt_pars
        assert self.opt_params.get_opt_pars != ffi.NULL
        if init_opt_ctx:
            self.opt_ctx = lib.ggml_opt_init(self.opt_params)
            assert self.opt_ctx != ffi.NULL
            assert lib.ggml_opt_context_optimizer_type(self.opt_ctx) == optim

        self.result = lib.ggml_opt_result_init()
        self.result2 = lib.ggml_opt_result_init()

    def free(self) -> None:
        """helper_free_ctx_data, in upstream's order; idempotent."""
        if self._freed:
            return
        self._freed = True
        if self.result != ffi.NULL:
            lib.ggml_opt_result_free(self.result)
        if self.result2 != ffi.NULL:
            lib.ggml_opt_result_free(self.result2)
        if self.opt_ctx != ffi.NULL:
            lib.ggml_opt_free(self.opt_ctx)
        if self.buf != ffi.NULL:
            lib.ggml_backend_buffer_free(self.buf)
        if self.ctx_static != ffi.NULL:
            lib.ggml_free(self.ctx_static)
        if self.ctx_compute != ffi.NULL:
            lib.ggml_free(self.ctx_compute)
        for ds in self.datasets_supervised:
            lib.ggml_opt_dataset_free(ds)
        if self.dataset_unsupervised != ffi.NULL:
            lib.ggml_opt_dataset_free(self.dataset_unsupervised)


@pytest.fixture
def make_ctx_data(sched, backend):
    """Factory for CtxData bound to this test's scheduler; everything is freed at teardown."""
    made: list[CtxData] = []

    def make(optim, **kwargs) -> CtxData:
        cd = CtxData(optim, sched, backend, **kwargs)
        made.append(cd)
        return cd

    yield make
    for cd in reversed(made):
        cd.free()


def assert_subtests(failures: list[str]) -> None:
    assert not failures, "failed subtests:\n  " + "\n  ".join(failures)


# --------------------------------------------------------------------------------------------------
# test_dataset
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shuffle", [False, True], ids=["no_shuffle", "shuffle"])
@pytest.mark.parametrize("optim", OPTIMIZERS)
def test_dataset(optim, shuffle, make_ctx_data):
    cd = make_ctx_data(optim)
    failures = []
    nsubtests = 0
    for ndata_shard in range(1, NDATA + 1):
        dataset = cd.datasets_supervised[ndata_shard - 1]
        if shuffle:
            lib.ggml_opt_dataset_shuffle(cd.opt_ctx, dataset, -1)

        for ndata_batch in range(1, NDATA + 1):
            if ndata_batch % ndata_shard != 0:
                continue
            nsubtests += 1
            ok = True
            data_batch = cd.data_batch[ndata_batch - 1]
            labels_batch = cd.labels_batch[ndata_batch - 1]

            idata_shuffled = []
            nbatches = NDATA // ndata_batch
            for ibatch in range(nbatches):
                lib.ggml_opt_dataset_get_batch(dataset, data_batch, labels_batch, ibatch)
                data = tensor_get(data_batch)
                labels = tensor_get(labels_batch)

                for idata_batch in range(ndata_batch):
                    idata = ibatch * ndata_batch + idata_batch
                    idata_found = int(data[idata_batch * NE_DATAPOINT] / 16)
                    ok = ok and (shuffle or idata_found == idata)
                    idata_shuffled.append(idata_found)
                    for i in range(NE_DATAPOINT):
                        if data[idata_batch * NE_DATAPOINT + i] != 16 * idata_found + i:
                            ok = False
                    for i in range(NE_LABEL):
                        if labels[idata_batch * NE_LABEL + i] != 16 * (16 * idata_found + i):
                            ok = False

            if not shuffle or NDATA % ndata_batch == 0:
                ndata_max = (NDATA // ndata_batch) * ndata_batch
                for idata in range(ndata_max):
                    if not ok:
                        break
                    if idata_shuffled.count(idata) != 1:
                        ok = False

            if not ok:
                failures.append(f"test_dataset(shuffle={shuffle}, ndata_shard={ndata_shard}, "
                                f"ndata_batch={ndata_batch}): batches {idata_shuffled}")
    assert nsubtests == 14  # the (shard, batch) pairs upstream visits
    assert_subtests(failures)


# --------------------------------------------------------------------------------------------------
# test_grad
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("optim", OPTIMIZERS)
def test_grad(optim, make_ctx_data):
    cd = make_ctx_data(optim, optimizer_defaults=False, nbatch_logical=999999, nbatch_physical=1)
    grad_history = [math.nan] * NDATA
    for idata in range(NDATA):
        lib.ggml_opt_alloc(cd.opt_ctx, True)
        tensor_set(cd.inputs, [idata])
        lib.ggml_opt_eval(cd.opt_ctx, cd.result)
        grad_history[idata] = get_scalar(lib.ggml_opt_grad_acc(cd.opt_ctx, cd.weights))
    # exact, as upstream (grad_history[idata] != idata + 1 fails)
    assert grad_history == [idata + 1 for idata in range(NDATA)]


# --------------------------------------------------------------------------------------------------
# test_forward_backward
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("high_level,shuffle", [(False, False), (True, False), (True, True)],
                         ids=["low_level", "high_level", "high_level_shuffle"])
@pytest.mark.parametrize("optim", OPTIMIZERS)
def test_forward_backward(optim, high_level, shuffle, make_ctx_data):
    cd = make_ctx_data(optim, optimizer_defaults=False)
    loss = lib.ggml_opt_loss(cd.opt_ctx)
    failures = []

    # results_initial
    ndata, loss_v, loss_unc, acc, acc_unc = result_values(cd.result)
    if not (ndata == 0 and almost_equal(loss_v, 0.0, 1e-6) and math.isnan(loss_unc) and math.isnan(acc)
            and math.isnan(acc_unc)):
        failures.append(f"results_initial: ndata={ndata} loss={loss_v}+-{loss_unc} acc={acc}+-{acc_unc}")

    run_epoch(cd, loss, high_level, None, cd.result, 0, shuffle)

    weights = get_scalar(cd.weights)
    if not almost_equal(weights, NDATA // 2, 1e-10):
        failures.append(f"weights_after_forward: {weights}")

    ndata, loss_v, loss_unc, acc, acc_unc = result_values(cd.result)
    if not (ndata == 6 and almost_equal(loss_v, 33.0, 1e-10) and almost_equal(loss_unc, math.sqrt(3.5), 1e-10)
            and math.isnan(acc) and math.isnan(acc_unc)):
        failures.append(f"results_after_forward: ndata={ndata} loss={loss_v}+-{loss_unc} acc={acc}+-{acc_unc}")

    # Ten optimizer steps, then weights, gradients and results back to the start.
    w0 = get_scalar(cd.weights)
    for _ in range(10):
        lib.ggml_opt_alloc(cd.opt_ctx, True)
        lib.ggml_opt_eval(cd.opt_ctx, cd.result)
    tensor_set(cd.weights, [w0])
    lib.ggml_opt_reset(cd.opt_ctx, False)
    lib.ggml_opt_result_reset(cd.result)

    loss_history = run_epoch(cd, loss, high_level, cd.result, None, NDATA, shuffle)

    weights = get_scalar(cd.weights)
    if not almost_equal(weights, -NDATA * 0.5, 1e-10):
        failures.append(f"weights_after_forward_backward: {weights}")

    ndata, loss_v, loss_unc, acc, acc_unc = result_values(cd.result)
    if not (ndata == 6 and almost_equal(loss_v, 18.0, 1e-10) and (shuffle or loss_unc == 0.0)
            and math.isnan(acc) and math.isnan(acc_unc)):
        failures.append(f"result_after_forward_backward: ndata={ndata} loss={loss_v}+-{loss_unc} "
                        f"acc={acc}+-{acc_unc}")
    if not high_level:
        # Not checked upstream (it only records them): each step lowers w by 1 and raises the input by
        # 1, so every per-sample loss is x + w = 3.
        assert loss_history == [3.0] * NDATA
    assert_subtests(failures)


# --------------------------------------------------------------------------------------------------
# test_epoch_vs_fit
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("optim", OPTIMIZERS)
def test_epoch_vs_fit(optim, sched, make_ctx_data):
    cd = make_ctx_data(optim, init_opt_ctx=True)
    dataset = cd.dataset_unsupervised
    lib.ggml_opt_dataset_shuffle(cd.opt_ctx, dataset, -1)
    lib.ggml_opt_epoch(cd.opt_ctx, dataset, cd.result, ffi.NULL, NDATA, ffi.NULL, ffi.NULL)
    weights_epoch = get_scalar(cd.weights)
    cd.free()

    cd = make_ctx_data(optim, init_opt_ctx=False)
    lib.ggml_opt_fit(sched, cd.ctx_compute, cd.inputs, cd.outputs, cd.dataset_unsupervised, LOSS_SUM, optim,
                     lib.ggml_opt_get_default_optimizer_params, 1, 1, 0.0, True)
    weights_fit = get_scalar(cd.weights)
    cd.free()

    assert weights_epoch == weights_fit  # bit-identical, as upstream


# --------------------------------------------------------------------------------------------------
# test_idata_split
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("high_level", [False, True], ids=["low_level", "high_level"])
@pytest.mark.parametrize("optim", OPTIMIZERS)
def test_idata_split(optim, high_level, make_ctx_data):
    cd = make_ctx_data(optim, optimizer_defaults=False)
    loss = lib.ggml_opt_loss(cd.opt_ctx)
    idata_split = NDATA * 2 // 3
    failures = []

    for epoch in range(1, 5):
        run_epoch(cd, loss, high_level, cd.result, cd.result2, idata_split)

        # Upstream checks these for AdamW only. With the test parameters (alpha 1, no decay) SGD steps by
        # -grad = -1 exactly as AdamW (beta1 = beta2 = eps = 0) steps by -grad/|grad|, so the expected
        # values are the same; SGD is checked too.
        weights = get_scalar(cd.weights)
        if not almost_equal(weights, NDATA // 2 - epoch * idata_split, 1e-10):
            failures.append(f"epoch {epoch} weights: {weights}")

        ndata, loss_v, loss_unc, acc, acc_unc = result_values(cd.result)
        if not (ndata == idata_split and almost_equal(loss_v, 28.0 - epoch * 16.0, 1e-10)
                and almost_equal(loss_unc, 0.0, 1e-10) and math.isnan(acc) and math.isnan(acc_unc)):
            failures.append(f"epoch {epoch} results_backward: ndata={ndata} loss={loss_v}+-{loss_unc} "
                            f"acc={acc}+-{acc_unc}")

        ndata, loss_v, loss_unc, acc, acc_unc = result_values(cd.result2)
        if not (ndata == NDATA - idata_split and almost_equal(loss_v, 15.0 - epoch * 8, 1e-10)
                and almost_equal(loss_unc, math.sqrt(0.5), 1e-10) and math.isnan(acc)
                and math.isnan(acc_unc)):
            failures.append(f"epoch {epoch} results_forward: ndata={ndata} loss={loss_v}+-{loss_unc} "
                            f"acc={acc}+-{acc_unc}")

        lib.ggml_opt_result_reset(cd.result)
        lib.ggml_opt_result_reset(cd.result2)
    assert_subtests(failures)


# --------------------------------------------------------------------------------------------------
# test_gradient_accumulation (upstream runs it for AdamW only)
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("loss_type", [LOSS_SUM, LOSS_MEAN], ids=["sum", "mean"])
@pytest.mark.parametrize("nbatch_physical", [2, 1, 6])
def test_gradient_accumulation(nbatch_physical, loss_type, make_ctx_data):
    # Upstream runs nbatch_physical 2 and 1; 6 (the whole logical batch in one physical batch, no
    # accumulation) is added here: the same weights and loss as accumulating over 6 x 1 or 3 x 2.
    optim = ADAMW
    cd = make_ctx_data(optim, optimizer_defaults=False, nbatch_logical=6, nbatch_physical=nbatch_physical,
                       loss_type=loss_type)
    failures = []
    for epoch in range(1, 5):
        grad_history = [math.nan] * NDATA
        if nbatch_physical == 1:
            for idata in range(NDATA):
                lib.ggml_opt_alloc(cd.opt_ctx, True)
                tensor_set(cd.inputs, [idata])
                lib.ggml_opt_eval(cd.opt_ctx, cd.result)
                grad_history[idata] = get_scalar(lib.ggml_opt_grad_acc(cd.opt_ctx, cd.weights))
        else:
            for idata in range(0, NDATA, nbatch_physical):
                lib.ggml_opt_alloc(cd.opt_ctx, True)
                tensor_set(cd.inputs, np.arange(idata, idata + nbatch_physical))
                lib.ggml_opt_eval(cd.opt_ctx, cd.result)
                grad_history[idata:idata + nbatch_physical - 1] = [0.0] * (nbatch_physical - 1)
                if nbatch_physical < NDATA:
                    grad_history[idata + nbatch_physical - 1] = get_scalar(
                        lib.ggml_opt_grad_acc(cd.opt_ctx, cd.weights))

        atol = 1e-6
        div = 1.0 if loss_type == LOSS_SUM else NDATA
        expected = {1: [1, 2, 3, 4, 5, 6], 2: [0, 2, 0, 4, 0, 6], 6: [0, 0, 0, 0, 0, 6]}[nbatch_physical]
        expected = [g / div for g in expected]
        if nbatch_physical == NDATA:
            # opt_period 1: no accumulator exists (ggml_opt_grad_acc returns NULL); the gradient is
            # not observable through ggml-opt, only its effect on the weights below.
            assert lib.ggml_opt_grad_acc(cd.opt_ctx, cd.weights) == ffi.NULL
        elif not all(almost_equal(g, e, atol) for g, e in zip(grad_history, expected)):
            failures.append(f"epoch {epoch} grads: {grad_history} != {expected}")

        weights = get_scalar(cd.weights)
        if not almost_equal(weights, NDATA // 2 - epoch, atol):
            failures.append(f"epoch {epoch} weights: {weights}")

        ndata_result = result_ndata(cd.result)
        loss_v, _ = result_loss(cd.result)
        acc, acc_unc = result_accuracy(cd.result)
        if not (almost_equal(ndata_result, NDATA / nbatch_physical, atol)
                and almost_equal(loss_v, (39.0 - epoch * 6.0) / div, atol)
                and math.isnan(acc) and math.isnan(acc_unc)):
            failures.append(f"epoch {epoch} results: ndata={ndata_result} loss={loss_v} acc={acc}+-{acc_unc}")

        lib.ggml_opt_result_reset(cd.result)
    assert_subtests(failures)


# --------------------------------------------------------------------------------------------------
# test_regression
# --------------------------------------------------------------------------------------------------
def _mt19937(seed: int) -> random.Random:
    """std::mt19937(seed): CPython's generator is MT19937 too; load the state of init_genrand(seed)."""
    mt = [seed & 0xFFFFFFFF]
    for i in range(1, 624):
        mt.append((1812433253 * (mt[-1] ^ (mt[-1] >> 30)) + i) & 0xFFFFFFFF)
    rng = random.Random()
    rng.setstate((3, tuple(mt) + (624,), None))
    return rng  # getrandbits(32) is then exactly the next mt19937 output


class _NormalDistributionF32:
    """libstdc++'s std::normal_distribution<float> (Marsaglia polar method), bit for bit in float32."""

    def __init__(self, rng: random.Random, mean: float, stddev: float) -> None:
        self.rng, self.mean, self.stddev = rng, np.float32(mean), np.float32(stddev)
        self.saved = None

    def _canonical(self) -> np.float32:
        # std::generate_canonical<float, 24>(mt19937): one 32-bit draw, float(u) / 2^32, below 1
        ret = np.float32(self.rng.getrandbits(32)) / np.float32(2.0**32)
        return ret if ret < 1 else np.nextafter(np.float32(1), np.float32(0))

    def __call__(self) -> np.float32:
        if self.saved is not None:
            ret, self.saved = self.saved, None
        else:
            while True:
                # __x = result_type(2.0) * __aurng() - 1.0 (the subtraction in double, stored as float)
                x = np.float32(float(np.float32(2) * self._canonical()) - 1.0)
                y = np.float32(float(np.float32(2) * self._canonical()) - 1.0)
                r2 = x * x + y * y
                if not (r2 > 1.0 or r2 == 0.0):
                    break
            mult = np.sqrt(np.float32(-2) * np.float32(math.log(float(r2))) / r2)
            self.saved = x * mult
            ret = y * mult
        return ret * self.stddev + self.mean


def regression_data(ndata: int, a_true: float, b_true: float):
    gen = _NormalDistributionF32(_mt19937(12345), 0.0, 0.1)
    x_min, x_max = np.float32(-100.0), np.float32(100.0)
    xs = np.empty(ndata, dtype=np.float32)
    ys = np.empty(ndata, dtype=np.float32)
    for idata in range(ndata):
        x = x_min + (x_max - x_min) * np.float32(idata) / np.float32(ndata - 1)
        xs[idata] = x
        ys[idata] = np.float32(a_true) * x + np.float32(b_true) + gen()
    return xs, ys


def test_regression_data_matches_cpp():
    # First values printed by the C++ loop of test_regression (g++ 12 / libstdc++, std::mt19937(12345)).
    xs, ys = regression_data(201, 1.2, 3.4)
    assert xs[0] == -100.0 and xs[100] == 0.0 and xs[200] == 100.0
    assert ys[:3].tolist() == [np.float32(-116.678589), np.float32(-115.439079), np.float32(-114.147118)]


@pytest.mark.parametrize("optim", OPTIMIZERS)
def test_regression(optim, sched, backend):
    ndata_regression = 201
    a_true, b_true = 1.2, 3.4
    xs, ys = regression_data(ndata_regression, a_true, b_true)

    dataset = lib.ggml_opt_dataset_init(F32, F32, 1, 1, ndata_regression, ndata_regression)
    ctx_static = ctx_compute = buf = ffi.NULL
    try:
        host_f32(lib.ggml_opt_dataset_data(dataset), ndata_regression)[:] = xs
        host_f32(lib.ggml_opt_dataset_labels(dataset), ndata_regression)[:] = ys

        ctx_static = new_context(3 * lib.ggml_tensor_overhead())
        ctx_compute = new_context(compute_ctx_size())

        # First dimension: the datapoint; second: the datapoints.
        x = lib.ggml_new_tensor_2d(ctx_static, F32, 1, ndata_regression)
        lib.ggml_set_name(x, b"x")
        a = lib.ggml_new_tensor_1d(ctx_static, F32, 1)
        lib.ggml_set_name(a, b"a")
        lib.ggml_set_param(a)
        b = lib.ggml_new_tensor_1d(ctx_static, F32, 1)
        lib.ggml_set_name(b, b"b")
        lib.ggml_set_param(b)

        f = lib.ggml_add(ctx_compute, lib.ggml_mul(ctx_compute, x, a), b)
        lib.ggml_set_name(f, b"f")

        buf = lib.ggml_backend_alloc_ctx_tensors(ctx_static, backend)
        assert buf != ffi.NULL
        a0, b0 = 1.0, 3.0
        tensor_set(a, [a0])
        tensor_set(b, [b0])

        adamw = optim == ADAMW
        n_epoch = 100 if adamw else G_SGD_EPOCHS
        lib.ggml_opt_fit(sched, ctx_compute, x, f, dataset, lib.GGML_OPT_LOSS_TYPE_MEAN_SQUARED_ERROR, optim,
                         helper_get_regression_opt_pars, n_epoch, ndata_regression, 0.0, True)

        a_fit, b_fit = get_scalar(a), get_scalar(b)
    finally:
        if buf != ffi.NULL:
            lib.ggml_backend_buffer_free(buf)
        if ctx_static != ffi.NULL:
            lib.ggml_free(ctx_static)
        if ctx_compute != ffi.NULL:
            lib.ggml_free(ctx_compute)
        lib.ggml_opt_dataset_free(dataset)

    if adamw:
        tol = 1e-2  # upstream
        assert almost_equal(a_fit, a_true, tol) and almost_equal(b_fit, b_true, tol), (a_fit, b_fit)
    else:
        # Upstream computes tol = 5e-2 for SGD but reports OK regardless: with lr 1e-4 decaying, the
        # slope converges within a few epochs while the intercept moves by a few percent of its gap.
        # Checked here instead: the slope within upstream's SGD tolerance, and b moved toward b_true.
        assert almost_equal(a_fit, a_true, 5e-2), a_fit
        assert abs(b_fit - b_true) < abs(b0 - b_true), b_fit
