"""llama.cpp's own trainer, the steps of its ``examples/training/finetune.cpp`` (``llama-finetune``) run
through llama-cpp-python's libraries: the model read into memory (load mode none: writable weights), a
context of n_ctx = n_batch = n_ubatch (so that the key and value projections get gradients) with F32
key / value caches, the token stream's windows of n_ctx ids every ``stride`` ids as
``common_opt_dataset_init`` lays them out (ids and next ids), ``llama_opt_init`` with every tensor but
the token embedding trained (``llama_opt_param_filter_all``; llama.cpp never trains ``tok_embd``) and
constant AdamW parameters (``ggml_opt_get_constant_optimizer_params``), then ``llama_opt_epoch`` per
epoch over the windows in order, one optimizer step per window, the loss read from the epoch's result.

llama-cpp-python 0.3.36's ``llama_opt_params`` lacks the struct's last field (``optimizer_type``), so
the struct is declared here as its ``llama.h`` has it; the dataset and the result come from the ggml of
llama-cpp-python's own build (``libggml-base``), never from pyggml_opt's. ``pyggml_finetune`` trains the
same way with pyggml_opt's ``fit``."""
from __future__ import annotations

import ctypes
import os
import time

import numpy as np

GGML_TYPE_F32, GGML_TYPE_I32 = 0, 26
ADAMW = 0  # enum ggml_opt_optimizer_type


class OptimizerParams(ctypes.Structure):
    """ggml-opt.h's ``struct ggml_opt_optimizer_params``."""

    _fields_ = [("adamw_alpha", ctypes.c_float), ("adamw_beta1", ctypes.c_float), ("adamw_beta2", ctypes.c_float),
                ("adamw_eps", ctypes.c_float), ("adamw_wd", ctypes.c_float),
                ("sgd_alpha", ctypes.c_float), ("sgd_wd", ctypes.c_float)]


class OptParams(ctypes.Structure):
    """llama.h's ``struct llama_opt_params``."""

    _fields_ = [("n_ctx_train", ctypes.c_uint32), ("param_filter", ctypes.c_void_p),
                ("param_filter_ud", ctypes.c_void_p), ("get_opt_pars", ctypes.c_void_p),
                ("get_opt_pars_ud", ctypes.c_void_p), ("optimizer_type", ctypes.c_int)]


def llama_finetune(path: str, x: np.ndarray, y: np.ndarray, epochs: int, lr: float, n_threads: int,
                   betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0
                   ) -> list[tuple[float, float]]:
    """Train the GGUF model ``path`` as llama-finetune does on windows ``x`` (n, n_ctx) with next ids
    ``y``, in order, one AdamW step per window; (loss, seconds) per epoch. The file is not written."""
    import llama_cpp

    lib = llama_cpp.llama_cpp._lib
    ggml = ctypes.CDLL(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so"))
    for fn, args, res in ((ggml.ggml_opt_dataset_init, [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64,
                                                         ctypes.c_int64, ctypes.c_int64], ctypes.c_void_p),
                          (ggml.ggml_opt_dataset_data, [ctypes.c_void_p], ctypes.c_void_p),
                          (ggml.ggml_opt_dataset_labels, [ctypes.c_void_p], ctypes.c_void_p),
                          (ggml.ggml_opt_dataset_free, [ctypes.c_void_p], None),
                          (ggml.ggml_get_data, [ctypes.c_void_p], ctypes.c_void_p),
                          (ggml.ggml_opt_result_init, [], ctypes.c_void_p),
                          (ggml.ggml_opt_result_reset, [ctypes.c_void_p], None),
                          (ggml.ggml_opt_result_free, [ctypes.c_void_p], None),
                          (ggml.ggml_opt_result_loss, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_double),
                                                       ctypes.POINTER(ctypes.c_double)], None),
                          (lib.llama_opt_init, [ctypes.c_void_p, ctypes.c_void_p, OptParams], None),
                          (lib.llama_opt_epoch, [ctypes.c_void_p] * 4 + [ctypes.c_int64, ctypes.c_void_p,
                                                                         ctypes.c_void_p], None)):
        fn.argtypes, fn.restype = args, res
    n, n_ctx = x.shape
    llama_cpp.llama_backend_init()
    mparams = llama_cpp.llama_model_default_params()
    mparams.load_mode = 0  # LLAMA_LOAD_MODE_NONE: read into writable memory, as finetune.cpp forces
    model = llama_cpp.llama_model_load_from_file(path.encode(), mparams)
    if not model:
        raise RuntimeError(f"llama.cpp could not load {path}")
    cparams = llama_cpp.llama_context_default_params()
    cparams.n_ctx = cparams.n_batch = cparams.n_ubatch = n_ctx
    cparams.n_threads = cparams.n_threads_batch = n_threads
    cparams.type_k = cparams.type_v = GGML_TYPE_F32
    cparams.flash_attn_type = 0  # disabled: FLASH_ATTN_EXT has no backward pass
    ctx = llama_cpp.llama_init_from_model(model, cparams)
    made = llama_cpp.llama_n_ctx(ctx)
    if made != n_ctx:  # llama.cpp pads contexts to a multiple of 256
        llama_cpp.llama_free(ctx)
        llama_cpp.llama_model_free(model)
        raise ValueError(f"llama.cpp made a context of {made} for windows of {n_ctx}: give windows of a multiple "
                         "of 256 ids")
    dataset = ggml.ggml_opt_dataset_init(GGML_TYPE_I32, GGML_TYPE_I32, n_ctx, n_ctx, n, 1)
    results = [ggml.ggml_opt_result_init(), ggml.ggml_opt_result_init()]
    try:
        for tensor, values in ((ggml.ggml_opt_dataset_data(dataset), x), (ggml.ggml_opt_dataset_labels(dataset), y)):
            ctypes.memmove(ggml.ggml_get_data(tensor), np.ascontiguousarray(values, np.int32).ctypes.data, values.size * 4)
        constant = OptimizerParams(lr, betas[0], betas[1], eps, weight_decay, lr, weight_decay)
        params = OptParams(0, ctypes.cast(lib.llama_opt_param_filter_all, ctypes.c_void_p), None,
                           ctypes.cast(ggml.ggml_opt_get_constant_optimizer_params, ctypes.c_void_p),
                           ctypes.cast(ctypes.pointer(constant), ctypes.c_void_p), ADAMW)
        lib.llama_opt_init(ctx, model, params)
        out = []
        for _ in range(epochs):
            t0 = time.perf_counter()
            lib.llama_opt_epoch(ctx, dataset, results[0], results[1], n, None, None)
            seconds = time.perf_counter() - t0
            loss, unc = ctypes.c_double(), ctypes.c_double()
            ggml.ggml_opt_result_loss(results[0], ctypes.byref(loss), ctypes.byref(unc))
            out.append((loss.value, seconds))
            ggml.ggml_opt_result_reset(results[0])
        return out
    finally:
        for r in results:
            ggml.ggml_opt_result_free(r)
        ggml.ggml_opt_dataset_free(dataset)
        llama_cpp.llama_free(ctx)
        llama_cpp.llama_model_free(model)


def pyggml_finetune(path: str, x: np.ndarray, y: np.ndarray, epochs: int, lr: float, n_threads: int
                    ) -> tuple[object, list[tuple[float, float]]]:
    """pyggml_opt's side, as ``llama_finetune`` trains: the file loaded, the token embedding frozen,
    AdamW one window per step in order; (the model, (loss, seconds) per epoch)."""
    import pyggml_opt as pgo

    model = pgo.load(path)
    model.freeze("tok")
    h = model.fit(x, y, epochs=epochs, batch_size=1, shuffle=False, optimizer=pgo.AdamW(lr=lr), verbose=0,
                  n_threads=n_threads, metrics=[])
    return model, list(zip(h["loss"], h["time"]))
