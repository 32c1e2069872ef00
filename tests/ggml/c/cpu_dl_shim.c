// ggml-cpu.h functions used by ggml's examples/mnist, for a GGML_BACKEND_DL build of ggml.
//
// With GGML_BACKEND_DL the CPU backend is a module picked at run time (one per instruction-set
// level), so libggml does not export ggml_backend_is_cpu / ggml_backend_cpu_set_n_threads. These
// two stand-ins reach the same behaviour through the public backend registry API.
#include "ggml-backend.h"
#include "ggml-cpu.h"

bool ggml_backend_is_cpu(ggml_backend_t backend) {
    ggml_backend_dev_t dev = ggml_backend_get_device(backend);
    return dev != NULL && ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU;
}

void ggml_backend_cpu_set_n_threads(ggml_backend_t backend, int n_threads) {
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(ggml_backend_get_device(backend));
    ggml_backend_set_n_threads_t fn =
        (ggml_backend_set_n_threads_t) ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads");
    if (fn != NULL) {
        fn(backend, n_threads);
    }
}

// ggml's mnist tools never call ggml_backend_load_all (a static build registers the CPU backend by
// itself); with GGML_BACKEND_DL nothing is registered until the backends are loaded, so load them,
// from the executable's folder, before main() runs.
__attribute__((constructor)) static void pyggml_opt_load_backends(void) {
    ggml_backend_load_all();
}
