// Vendor patch 0046: ggml-alloc lets an in-place op (ggml_op_can_inplace) take the memory of a source
// that is a view (a RESHAPE, or a VIEW at offset 0 with the op's layout) of a tensor the allocator owns,
// when that view is the last use of the tensor. Each case builds a graph on the CPU backend, allocates it
// with ggml_gallocr and checks where the op's result landed and the computed values.

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"

#include <cmath>
#include <cstdio>
#include <vector>

static int n_failed = 0;

static void check(bool ok, const char * what) {
    printf("  %s: %s\n", what, ok ? "OK" : "FAILED");
    n_failed += !ok;
}

enum view_kind { RESHAPE, VIEW_AT_0, VIEW_AT_HALF };

// s = scale(v(a + b), 2) where v is view_kind of the sum; with `reread` the sum is read again after s
// (out = s + sum), with `output` the sum is a graph output
static void run_case(ggml_backend_t backend, const char * name, view_kind kind, bool reread, bool output,
                     bool expect_reuse) {
    printf("%s\n", name);
    const int64_t n = 64;
    ggml_init_params ip = { 16*ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true };
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
    ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
    ggml_set_input(a);
    ggml_set_input(b);
    ggml_tensor * sum = ggml_add(ctx, a, b);
    if (output) {
        ggml_set_output(sum);
    }
    ggml_tensor * v = kind == RESHAPE   ? ggml_reshape_2d(ctx, sum, 8, n/8)
                    : kind == VIEW_AT_0 ? ggml_view_1d(ctx, sum, n/2, 0)
                    :                     ggml_view_1d(ctx, sum, n/2, (n/2)*sizeof(float));
    ggml_tensor * s = ggml_scale(ctx, v, 2.0f);
    ggml_tensor * out = reread ? ggml_add(ctx, ggml_reshape_1d(ctx, s, ggml_nelements(s)),
                                          ggml_view_1d(ctx, sum, ggml_nelements(s), 0)) : s;
    ggml_set_output(out);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);

    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_get_default_buffer_type(backend));
    check(ggml_gallocr_alloc_graph(galloc, gf), "allocated");
    check((s->data == sum->data) == expect_reuse, expect_reuse ? "the op took the view's memory"
                                                               : "the op has memory of its own");
    std::vector<float> va(n), vb(n);
    for (int64_t i = 0; i < n; i++) {
        va[i] = 0.5f*i;
        vb[i] = 1.0f - 0.25f*i;
    }
    ggml_backend_tensor_set(a, va.data(), 0, n*sizeof(float));
    ggml_backend_tensor_set(b, vb.data(), 0, n*sizeof(float));
    check(ggml_backend_graph_compute(backend, gf) == GGML_STATUS_SUCCESS, "computed");
    std::vector<float> got(ggml_nelements(out));
    ggml_backend_tensor_get(out, got.data(), 0, got.size()*sizeof(float));
    const int64_t first = kind == VIEW_AT_HALF ? n/2 : 0;
    bool equal = true;
    for (int64_t i = 0; i < (int64_t) got.size(); i++) {
        const float x = va[first + i] + vb[first + i];
        const float want = reread ? 2.0f*x + (va[i] + vb[i]) : 2.0f*x;
        equal = equal && std::fabs(got[i] - want) <= 1e-6f*std::fabs(want);
    }
    check(equal, "values");
    ggml_gallocr_free(galloc);
    ggml_free(ctx);
}

int main() {
    ggml_backend_load_all();
    ggml_backend_t backend = ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, nullptr);
    run_case(backend, "reshape of the last use", RESHAPE, false, false, true);
    run_case(backend, "view at offset 0 of the last use", VIEW_AT_0, false, false, true);
    run_case(backend, "view at an offset", VIEW_AT_HALF, false, false, false);
    run_case(backend, "reshape of a tensor read again later", RESHAPE, true, false, false);
    run_case(backend, "reshape of a graph output", RESHAPE, false, true, false);
    ggml_backend_free(backend);
    printf("%s\n", n_failed == 0 ? "all cases passed" : "FAILED");
    return n_failed == 0 ? 0 : 1;
}
