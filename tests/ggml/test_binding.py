"""The raw cffi binding: loading, layouts, callbacks, and the ImportError of a broken install."""
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pyggml_opt._lib import LIB_DIR, c_str, cpu_proc, ffi, lib


def test_struct_layouts_match_the_compiled_headers():
    # cffi API mode compiled every struct against ggml's headers (a mismatch fails the build);
    # these are the sizes of ggml 0.25.3 (as of 0.15.3) on 64-bit platforms, checked again at run time.
    assert ffi.sizeof("struct ggml_tensor") == 336
    assert ffi.sizeof("struct ggml_opt_optimizer_params") == 7 * 4
    assert ffi.offsetof("struct ggml_opt_optimizer_params", "sgd") == 5 * 4
    assert ffi.sizeof("struct ggml_init_params") == 24


def test_cpu_backend_is_loaded_from_the_package():
    names = [c_str(lib.ggml_backend_dev_name(lib.ggml_backend_dev_get(i))) for i in range(lib.ggml_backend_dev_count())]
    assert "CPU" in names
    assert any(p.name.startswith("libggml-base") for p in LIB_DIR.iterdir())
    assert cpu_proc("ggml_backend_set_n_threads", "ggml_backend_set_n_threads_t") is not None
    assert cpu_proc("no_such_function", "void *") is None


def test_optimizer_params_struct_returned_by_value_from_c():
    # ggml-opt's own default callback returns the struct by value through the binding.
    p = lib.ggml_opt_get_default_optimizer_params(ffi.NULL)
    assert p.adamw.alpha == pytest.approx(0.001)
    assert p.adamw.beta1 == pytest.approx(0.9)
    assert p.adamw.beta2 == pytest.approx(0.999)
    assert p.sgd.alpha == pytest.approx(0.001)


def test_python_optimizer_callback_returns_struct_by_value():
    # The Python side of the same callback (extern "Python"), called through its C pointer.
    import pyggml_opt as pgo
    opt = pgo.AdamW(lr=lambda step: 0.5 / (step + 1), beta1=0.8, weight_decay=0.1)

    class Steps:
        """The userdata an OptContext hands ggml-opt: anything whose c_params() gives the struct (there,
        the optimizer's at the context's step; here steps 0, 1, 2)."""

        def __init__(self):
            self.step = -1

        def c_params(self):
            self.step += 1
            return opt.c_params(self.step)

    handle = ffi.new_handle(Steps())
    fn = ffi.cast("ggml_opt_get_optimizer_params", lib.pyggml_get_optimizer_params)
    got = [fn(handle) for _ in range(3)]
    assert [g.adamw.alpha for g in got] == pytest.approx([0.5, 0.25, 0.5 / 3])
    assert got[0].adamw.beta1 == pytest.approx(0.8)
    assert got[0].adamw.wd == pytest.approx(0.1)


def test_tensor_roundtrip_through_cpu_backend():
    from pyggml_opt.core import Backend, Buffer, Context
    from pyggml_opt.core import tensor_data
    ctx = Context(1)
    t = lib.ggml_new_tensor_2d(ctx.ptr, lib.GGML_TYPE_F32, 3, 2)
    buf = Buffer(ctx, Backend("cpu", 1))
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    tensor_data.set(t, value)
    np.testing.assert_array_equal(tensor_data.get(t), value)
    buf.close()
    buf.close()  # idempotent
    ctx.close()


def test_host_view_writes_into_a_cpu_tensor_and_refuses_what_it_cannot_view():
    from pyggml_opt.core import Backend, Buffer, Context
    from pyggml_opt.core import tensor_data
    ctx = Context(2)
    t = lib.ggml_new_tensor_2d(ctx.ptr, lib.GGML_TYPE_F32, 3, 2)
    assert tensor_data.host_view(t, (2, 3)) is None          # not allocated yet
    buf = Buffer(ctx, Backend("cpu", 1))
    view = tensor_data.host_view(t, (2, 3))
    view[...] = [[1, 2, 3], [4, 5, 6]]
    np.testing.assert_array_equal(tensor_data.get(t), [[1, 2, 3], [4, 5, 6]])
    with pytest.raises(ValueError, match="does not cover"):
        tensor_data.host_view(t, (3, 3))
    buf.close()
    ctx.close()


def test_import_works_from_another_directory(tmp_path):
    out = subprocess.run([sys.executable, "-c", "import pyggml_opt, sys; print(pyggml_opt.devices()[0].name)"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "CPU"


def test_missing_library_gives_importerror_naming_the_file(tmp_path):
    # A copy of the installed package without its lib/ folder.
    import pyggml_opt
    ext = Path(pyggml_opt._lib._ggml.__file__)
    pkg = tmp_path / "pyggml_opt"
    shutil.copytree(Path(pyggml_opt.__file__).parent, pkg, ignore=shutil.ignore_patterns("lib", "__pycache__"))
    shutil.copy(ext, pkg / ext.name)
    code = textwrap.dedent("""
        import sys
        # an editable install's import hook would find the real package first
        sys.meta_path = [f for f in sys.meta_path if "editable" not in type(f).__module__]
        try:
            import pyggml_opt
        except ImportError as e:
            print("IMPORTERROR", e)
    """)
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert "IMPORTERROR" in out.stdout, out.stdout + out.stderr
    assert "libggml" in out.stdout  # the missing file is named
    assert str(pkg) in out.stdout


def test_abort_callback_prints_ggml_message_and_python_stack():
    # The last line of defence: a GGML_ASSERT reached through the raw binding still aborts (ggml
    # cannot continue), but first prints ggml's message and the Python stack that led there.
    code = textwrap.dedent("""
        from pyggml_opt._lib import lib
        def build_empty_dataset():
            lib.ggml_opt_dataset_init(lib.GGML_TYPE_F32, lib.GGML_TYPE_F32, 4, 1, 0, 1)  # ndata = 0
        build_empty_dataset()
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "pyggml_opt: ggml aborted" in out.stderr
    assert "GGML_ASSERT(ndata > 0) failed" in out.stderr
    assert "build_empty_dataset" in out.stderr  # the Python frame that called into ggml
