// Vendor patch 0037: on the CPU backend an index outside its table in GET_ROWS, GET_ROWS_BACK, SET_ROWS,
// ADD_ID or MUL_MAT_ID fails the graph instead of aborting the process. The graph returns
// GGML_STATUS_FAILED and stops after that node (the next node is not computed); the op leaves the row out
// (GET_ROWS and MUL_MAT_ID write zeros, ADD_ID adds nothing, SET_ROWS and GET_ROWS_BACK skip it) and its
// other rows are right. ggml_opt_eval returns the status, and a failed training step changes neither the
// parameters, the iteration count nor the result. Every case runs on 1, 2 and 3 threads, without a thread
// pool and on one pool kept across graphs (a failure must not outlive its graph: the next good graph on
// the same pool succeeds).

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-opt.h"

#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

struct cpu_backend {
    ggml_backend_t            backend;
    struct ggml_threadpool  * pool;   // NULL: ggml makes a pool per graph
    int                       n_threads;
};

typedef struct ggml_threadpool * (*threadpool_new_t)(struct ggml_threadpool_params *);
typedef void (*threadpool_free_t)(struct ggml_threadpool *);
typedef void (*set_threadpool_t)(ggml_backend_t, struct ggml_threadpool *);

// ggml-cpu.h's functions through the registry: with GGML_BACKEND_DL they live in the CPU variant loaded at run time
static void * cpu_proc(const char * name) {
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU));
    return ggml_backend_reg_get_proc_address(reg, name);
}

static cpu_backend cpu_init(int n_threads, bool pool) {
    cpu_backend cpu = { ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_CPU, nullptr), nullptr, n_threads };
    ((ggml_backend_set_n_threads_t) cpu_proc("ggml_backend_set_n_threads"))(cpu.backend, n_threads);
    if (pool) {
        struct ggml_threadpool_params tpp = ggml_threadpool_params_default(n_threads);
        cpu.pool = ((threadpool_new_t) cpu_proc("ggml_threadpool_new"))(&tpp);
        ((set_threadpool_t) cpu_proc("ggml_backend_cpu_set_threadpool"))(cpu.backend, cpu.pool);
    }
    return cpu;
}

static void cpu_free(cpu_backend & cpu) {
    ggml_backend_free(cpu.backend);
    if (cpu.pool) {
        ((threadpool_free_t) cpu_proc("ggml_threadpool_free"))(cpu.pool);
    }
}

// a context whose tensors get a buffer of their own (no tensor shares memory with another), with room
// for a graph per compute
struct graph_ctx {
    ggml_context          * ctx;
    ggml_backend_buffer_t   buf;
};

static graph_ctx graph_ctx_init() {
    struct ggml_init_params params = { 64*ggml_tensor_overhead() + 4*ggml_graph_overhead(), nullptr, true };
    return { ggml_init(params), nullptr };
}

static void graph_ctx_alloc(graph_ctx & g, const cpu_backend & cpu) {
    g.buf = ggml_backend_alloc_ctx_tensors(g.ctx, cpu.backend);
}

static void graph_ctx_free(graph_ctx & g) {
    ggml_backend_buffer_free(g.buf);
    ggml_free(g.ctx);
}

static enum ggml_status compute(const cpu_backend & cpu, ggml_context * ctx, ggml_tensor * out) {
    struct ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    return ggml_backend_graph_compute(cpu.backend, gf);
}

static std::vector<float> get_f32(const ggml_tensor * t) {
    std::vector<float> v(ggml_nelements(t));
    ggml_backend_tensor_get(t, v.data(), 0, ggml_nbytes(t));
    return v;
}

static const uint8_t SENTINEL = 0x5a;

// the node after the failing one: CONT of its result, preset to SENTINEL bytes, still holds them if the
// graph stopped where it should
static ggml_tensor * next_node(ggml_context * ctx, ggml_tensor * t) {
    return ggml_cont(ctx, t);
}

static void preset(ggml_tensor * t) {
    std::vector<uint8_t> bytes(ggml_nbytes(t), SENTINEL);
    ggml_backend_tensor_set(t, bytes.data(), 0, bytes.size());
}

static bool untouched(const ggml_tensor * t) {
    std::vector<uint8_t> bytes(ggml_nbytes(t));
    ggml_backend_tensor_get(t, bytes.data(), 0, bytes.size());
    for (uint8_t b : bytes) {
        if (b != SENTINEL) {
            return false;
        }
    }
    return true;
}

static bool report(const char * name, const char * args, const cpu_backend & cpu, bool ok) {
    printf("  %s(%s, n_threads=%d, pool=%s): %s\n", name, args, cpu.n_threads, cpu.pool ? "yes" : "no",
           ok ? "\033[1;32mOK\033[0m" : "\033[1;31mFAIL\033[0m");
    return ok;
}

// ---- GET_ROWS ---------------------------------------------------------------------------------------------

static const int64_t NCOL = 32;  // one block of the quantized types
static const int64_t NROW = 5;

static bool test_get_rows(const cpu_backend & cpu, enum ggml_type type) {
    graph_ctx g = graph_ctx_init();
    ggml_tensor * table = ggml_new_tensor_2d(g.ctx, type, NCOL, NROW);
    ggml_tensor * ids   = ggml_new_tensor_1d(g.ctx, GGML_TYPE_I32, 6);
    ggml_tensor * rows  = ggml_get_rows(g.ctx, table, ids);
    ggml_tensor * out   = next_node(g.ctx, rows);
    graph_ctx_alloc(g, cpu);

    // row r, column j: r + 1 + j/4, exact in every float type (and in Q8_0 up to its rounding, which
    // the reference below shares: it converts the stored row)
    std::vector<float> values(NCOL*NROW);
    std::vector<int32_t> ivalues(NCOL*NROW);
    for (int64_t r = 0; r < NROW; ++r) {
        for (int64_t j = 0; j < NCOL; ++j) {
            values [r*NCOL + j] = (float) (r + 1) + 0.25f*(float) j;
            ivalues[r*NCOL + j] = (int32_t) (100*r + j + 1);
        }
    }
    const size_t row_size = ggml_row_size(type, NCOL);
    std::vector<uint8_t> stored(row_size*NROW);
    if (type == GGML_TYPE_I32) {
        memcpy(stored.data(), ivalues.data(), stored.size());
    } else if (type == GGML_TYPE_F32) {
        memcpy(stored.data(), values.data(), stored.size());
    } else {
        ggml_quantize_chunk(type, values.data(), stored.data(), 0, NROW, NCOL, nullptr);
    }
    ggml_backend_tensor_set(table, stored.data(), 0, stored.size());

    // what row r of the result must hold, as 4-byte words (float, or int32 for an I32 table)
    std::vector<uint32_t> ref(NCOL*NROW);
    for (int64_t r = 0; r < NROW; ++r) {
        if (type == GGML_TYPE_I32 || type == GGML_TYPE_F32) {
            memcpy(ref.data() + r*NCOL, stored.data() + r*row_size, NCOL*4);
        } else {
            std::vector<float> row(NCOL);
            ggml_get_type_traits(type)->to_float(stored.data() + r*row_size, row.data(), NCOL);
            memcpy(ref.data() + r*NCOL, row.data(), NCOL*4);
        }
    }

    // a bad index at both ends (each thread of 2 has one), only in the last row (a thread other than
    // the first finds it), far out of range; then good ones on the same pool
    const int32_t cases[4][6] = {
        { -1,        1, 4, 0, 3, (int32_t) NROW },
        {  0,        1, 2, 3, 4, 7              },
        { INT32_MIN, 2, 2, 1, 0, INT32_MAX      },
        {  4,        3, 2, 1, 0, 0              },
    };
    bool ok = true;
    for (int c = 0; c < 4; ++c) {
        ggml_backend_tensor_set(ids, cases[c], 0, sizeof(cases[c]));
        preset(rows);
        preset(out);
        bool bad = false;
        for (int i = 0; i < 6; ++i) {
            bad |= cases[c][i] < 0 || cases[c][i] >= NROW;
        }
        const enum ggml_status status = compute(cpu, g.ctx, out);
        ok &= status == (bad ? GGML_STATUS_FAILED : GGML_STATUS_SUCCESS);

        std::vector<uint32_t> got(NCOL*6);
        ggml_backend_tensor_get(rows, got.data(), 0, ggml_nbytes(rows));
        for (int i = 0; i < 6; ++i) {
            const int32_t id = cases[c][i];
            for (int64_t j = 0; j < NCOL; ++j) {
                const uint32_t want = id < 0 || id >= NROW ? 0 : ref[id*NCOL + j];
                ok &= got[i*NCOL + j] == want;
            }
        }
        if (bad) {
            ok &= untouched(out);
        } else {
            std::vector<uint32_t> copy(NCOL*6);
            ggml_backend_tensor_get(out, copy.data(), 0, ggml_nbytes(out));
            ok &= copy == got;
        }
    }
    graph_ctx_free(g);
    return report("get_rows", ggml_type_name(type), cpu, ok);
}

// A failure must stop every thread after the same node, also when a thread leaves a barrier late:
// here a thread may still be on its way out of the ADD's barrier while a faster one already meets the
// bad index in the next node. A thread that stopped a node early would leave the other waiting at a
// barrier for ever (the test hangs; ctest's timeout fails it).
static bool test_get_rows_after_node(const cpu_backend & cpu) {
    const int64_t VOCAB = 4096, DIM = 32, N = 8;
    graph_ctx g = graph_ctx_init();
    ggml_tensor * table0 = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, DIM, VOCAB);
    ggml_tensor * ids    = ggml_new_tensor_1d(g.ctx, GGML_TYPE_I32, N);
    ggml_tensor * table  = ggml_add(g.ctx, table0, table0);
    ggml_tensor * rows   = ggml_get_rows(g.ctx, table, ids);
    ggml_tensor * out    = next_node(g.ctx, rows);
    graph_ctx_alloc(g, cpu);

    std::vector<float> tv(DIM*VOCAB, 1.0f);
    ggml_backend_tensor_set(table0, tv.data(), 0, ggml_nbytes(table0));
    std::vector<int32_t> idv(N);
    for (int64_t i = 0; i < N; ++i) {
        idv[i] = (int32_t) (i*97 % VOCAB);
    }
    struct ggml_cgraph * gf = ggml_new_graph(g.ctx);
    ggml_build_forward_expand(gf, out);
    bool ok = true;
    for (int rep = 0; rep < 300 && ok; ++rep) {
        const bool bad = rep % 2 == 0;
        idv[rep % N] = bad ? (int32_t) VOCAB : 1;
        ggml_backend_tensor_set(ids, idv.data(), 0, ggml_nbytes(ids));
        ok &= ggml_backend_graph_compute(cpu.backend, gf) == (bad ? GGML_STATUS_FAILED : GGML_STATUS_SUCCESS);
        idv[rep % N] = 1;
    }
    graph_ctx_free(g);
    return report("get_rows_after_node", "300 graphs", cpu, ok);
}

// ---- GET_ROWS_BACK ----------------------------------------------------------------------------------------

static bool test_get_rows_back(const cpu_backend & cpu) {
    graph_ctx g = graph_ctx_init();
    ggml_tensor * grad  = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 4, 6);
    ggml_tensor * ids   = ggml_new_tensor_1d(g.ctx, GGML_TYPE_I32, 6);
    ggml_tensor * shape = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 4, 3);
    ggml_tensor * back  = ggml_get_rows_back(g.ctx, grad, ids, shape);
    ggml_tensor * out   = next_node(g.ctx, back);
    graph_ctx_alloc(g, cpu);

    std::vector<float> gv(4*6);
    for (size_t i = 0; i < gv.size(); ++i) {
        gv[i] = (float) (i + 1);
    }
    ggml_backend_tensor_set(grad, gv.data(), 0, ggml_nbytes(grad));
    const int32_t idv[6] = { 2, -1, 0, 3, 2, 100000 };
    ggml_backend_tensor_set(ids, idv, 0, sizeof(idv));
    preset(out);

    bool ok = compute(cpu, g.ctx, out) == GGML_STATUS_FAILED;
    std::vector<float> want(4*3, 0.0f);
    for (int i = 0; i < 6; ++i) {
        if (idv[i] >= 0 && idv[i] < 3) {
            for (int j = 0; j < 4; ++j) {
                want[idv[i]*4 + j] += gv[i*4 + j];
            }
        }
    }
    ok &= get_f32(back) == want;
    ok &= untouched(out);
    graph_ctx_free(g);
    return report("get_rows_back", "f32", cpu, ok);
}

// ---- SET_ROWS ---------------------------------------------------------------------------------------------

static bool test_set_rows(const cpu_backend & cpu, enum ggml_type idx_type) {
    graph_ctx g = graph_ctx_init();
    ggml_tensor * dst = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 4, 5);
    ggml_tensor * src = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 4, 4);
    ggml_tensor * ids = ggml_new_tensor_1d(g.ctx, idx_type, 4);
    ggml_tensor * set = ggml_set_rows(g.ctx, dst, src, ids);
    ggml_tensor * out = next_node(g.ctx, set);
    graph_ctx_alloc(g, cpu);

    std::vector<float> dv(4*5, 9.0f);
    ggml_backend_tensor_set(dst, dv.data(), 0, ggml_nbytes(dst));
    std::vector<float> sv(4*4);
    for (size_t i = 0; i < sv.size(); ++i) {
        sv[i] = (float) (i + 1);
    }
    ggml_backend_tensor_set(src, sv.data(), 0, ggml_nbytes(src));
    const int64_t idv[4] = { 1, -1, 5, 3 };
    if (idx_type == GGML_TYPE_I64) {
        ggml_backend_tensor_set(ids, idv, 0, sizeof(idv));
    } else {
        const int32_t idv32[4] = { (int32_t) idv[0], (int32_t) idv[1], (int32_t) idv[2], (int32_t) idv[3] };
        ggml_backend_tensor_set(ids, idv32, 0, sizeof(idv32));
    }
    preset(out);

    bool ok = compute(cpu, g.ctx, out) == GGML_STATUS_FAILED;
    std::vector<float> want = dv;
    for (int i = 0; i < 4; ++i) {
        if (idv[i] >= 0 && idv[i] < 5) {
            memcpy(want.data() + idv[i]*4, sv.data() + i*4, 4*sizeof(float));
        }
    }
    ok &= get_f32(dst) == want;
    ok &= untouched(out);
    graph_ctx_free(g);
    return report("set_rows", ggml_type_name(idx_type), cpu, ok);
}

// ---- ADD_ID -----------------------------------------------------------------------------------------------

static bool test_add_id(const cpu_backend & cpu) {
    graph_ctx g = graph_ctx_init();
    ggml_tensor * a   = ggml_new_tensor_3d(g.ctx, GGML_TYPE_F32, 4, 2, 3);  // 2 experts used per token, 3 tokens
    ggml_tensor * b   = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 4, 3);     // one row per expert
    ggml_tensor * ids = ggml_new_tensor_2d(g.ctx, GGML_TYPE_I32, 2, 3);
    ggml_tensor * sum = ggml_add_id(g.ctx, a, b, ids);
    ggml_tensor * out = next_node(g.ctx, sum);
    graph_ctx_alloc(g, cpu);

    std::vector<float> av(4*2*3), bv(4*3);
    for (size_t i = 0; i < av.size(); ++i) {
        av[i] = (float) i;
    }
    for (size_t i = 0; i < bv.size(); ++i) {
        bv[i] = 1000.0f*(float) (i/4 + 1);
    }
    ggml_backend_tensor_set(a, av.data(), 0, ggml_nbytes(a));
    ggml_backend_tensor_set(b, bv.data(), 0, ggml_nbytes(b));
    const int32_t idv[6] = { 0, 3, -2, 2, 1, 1 };
    ggml_backend_tensor_set(ids, idv, 0, sizeof(idv));
    preset(out);

    bool ok = compute(cpu, g.ctx, out) == GGML_STATUS_FAILED;
    std::vector<float> want = av;
    for (int r = 0; r < 6; ++r) {
        if (idv[r] >= 0 && idv[r] < 3) {
            for (int j = 0; j < 4; ++j) {
                want[r*4 + j] += bv[idv[r]*4 + j];
            }
        }
    }
    ok &= get_f32(sum) == want;
    ok &= untouched(out);
    graph_ctx_free(g);
    return report("add_id", "f32", cpu, ok);
}

// ---- MUL_MAT_ID -------------------------------------------------------------------------------------------

static bool test_mul_mat_id(const cpu_backend & cpu) {
    const int K = 4, M = 3, N_AS = 2, N_USED = 2, N_TOK = 3;
    graph_ctx g = graph_ctx_init();
    ggml_tensor * as  = ggml_new_tensor_3d(g.ctx, GGML_TYPE_F32, K, M, N_AS);
    ggml_tensor * b   = ggml_new_tensor_3d(g.ctx, GGML_TYPE_F32, K, N_USED, N_TOK);
    ggml_tensor * ids = ggml_new_tensor_2d(g.ctx, GGML_TYPE_I32, N_USED, N_TOK);
    ggml_tensor * mm  = ggml_mul_mat_id(g.ctx, as, b, ids);
    ggml_tensor * out = next_node(g.ctx, mm);
    graph_ctx_alloc(g, cpu);

    std::vector<float> asv(K*M*N_AS), bv(K*N_USED*N_TOK);
    for (size_t i = 0; i < asv.size(); ++i) {
        asv[i] = (float) (i % 7) - 3.0f;
    }
    for (size_t i = 0; i < bv.size(); ++i) {
        bv[i] = (float) (i % 5) - 2.0f;
    }
    ggml_backend_tensor_set(as, asv.data(), 0, ggml_nbytes(as));
    ggml_backend_tensor_set(b, bv.data(), 0, ggml_nbytes(b));
    const int32_t idv[N_USED*N_TOK] = { 0, 2, 1, -1, 1, 0 };
    ggml_backend_tensor_set(ids, idv, 0, sizeof(idv));
    preset(mm);
    preset(out);

    bool ok = compute(cpu, g.ctx, out) == GGML_STATUS_FAILED;
    const std::vector<float> got = get_f32(mm);
    for (int t = 0; t < N_TOK; ++t) {
        for (int u = 0; u < N_USED; ++u) {
            const int e = idv[t*N_USED + u];
            for (int m = 0; m < M; ++m) {
                double want = 0.0;
                if (e >= 0 && e < N_AS) {
                    for (int k = 0; k < K; ++k) {
                        want += asv[(e*M + m)*K + k]*bv[(t*N_USED + u)*K + k];
                    }
                }
                ok &= std::fabs(got[(t*N_USED + u)*M + m] - want) < 1e-4;
            }
        }
    }
    ok &= untouched(out);
    graph_ctx_free(g);
    return report("mul_mat_id", "f32", cpu, ok);
}

// ---- ggml_opt_eval ----------------------------------------------------------------------------------------

static ggml_opt_optimizer_params sgd_pars(void * userdata) {
    ggml_opt_optimizer_params pars = ggml_opt_get_default_optimizer_params(userdata);
    pars.sgd.alpha = 0.5f;
    pars.sgd.wd    = 0.0f;
    return pars;
}

// a static training graph whose output is rows of a trained table picked by the input ids (an embedding),
// SUM loss, SGD: a good step lowers each picked row by alpha per pick; a failed one changes nothing
static bool test_opt_eval(const cpu_backend & cpu) {
    const int64_t DIM = 3, VOCAB = 4, BATCH = 4;
    struct ggml_init_params ps = { 8*ggml_tensor_overhead(), nullptr, true };
    ggml_context * ctx_static = ggml_init(ps);
    ggml_tensor * inputs = ggml_new_tensor_2d(ctx_static, GGML_TYPE_I32, 1, BATCH);
    ggml_tensor * table  = ggml_new_tensor_2d(ctx_static, GGML_TYPE_F32, DIM, VOCAB);
    ggml_set_param(table);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx_static, cpu.backend);

    struct ggml_init_params pc = { GGML_DEFAULT_GRAPH_SIZE*ggml_tensor_overhead() + 3*ggml_graph_overhead(), nullptr, true };
    ggml_context * ctx_compute = ggml_init(pc);
    ggml_tensor * flat    = ggml_reshape_1d(ctx_compute, inputs, BATCH);
    ggml_tensor * outputs = ggml_get_rows(ctx_compute, table, flat);

    ggml_backend_t backends[1] = { cpu.backend };
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends, nullptr, 1, GGML_DEFAULT_GRAPH_SIZE, false, true);
    struct ggml_opt_params params = ggml_opt_default_params(sched, GGML_OPT_LOSS_TYPE_SUM);
    params.ctx_compute  = ctx_compute;
    params.inputs       = inputs;
    params.outputs      = outputs;
    params.optimizer    = GGML_OPT_OPTIMIZER_TYPE_SGD;
    params.get_opt_pars = sgd_pars;
    ggml_opt_context_t opt_ctx = ggml_opt_init(params);
    ggml_opt_result_t  result  = ggml_opt_result_init();

    std::vector<float> tv(DIM*VOCAB);
    for (size_t i = 0; i < tv.size(); ++i) {
        tv[i] = (float) i;
    }
    ggml_backend_tensor_set(table, tv.data(), 0, ggml_nbytes(table));

    bool ok = true;
    const int32_t bad[BATCH]  = { 0, 1, (int32_t) VOCAB, 2 };
    const int32_t neg[BATCH]  = { -1, 1, 1, 2 };
    const int32_t good[BATCH] = { 3, 1, 1, 0 };
    int64_t ndata = -1;

    // training steps and a forward pass with bad ids fail and change nothing
    for (const int32_t * ids : { bad, neg }) {
        for (bool backward : { true, false }) {
            ggml_opt_alloc(opt_ctx, backward);
            ggml_backend_tensor_set(inputs, ids, 0, BATCH*sizeof(int32_t));
            ok &= ggml_opt_eval(opt_ctx, result) == GGML_STATUS_FAILED;
            ok &= ggml_opt_get_iter(opt_ctx) == 1;
            ok &= get_f32(table) == tv;
            ggml_opt_result_ndata(result, &ndata);
            ok &= ndata == 0;
        }
    }

    // then a good step on the same context: counted, and the table moves
    ggml_opt_alloc(opt_ctx, true);
    ggml_backend_tensor_set(inputs, good, 0, sizeof(good));
    ok &= ggml_opt_eval(opt_ctx, result) == GGML_STATUS_SUCCESS;
    ok &= ggml_opt_get_iter(opt_ctx) == 2;
    ggml_opt_result_ndata(result, &ndata);
    ok &= ndata == BATCH;
    std::vector<float> want = tv;
    for (int32_t id : good) {
        for (int64_t j = 0; j < DIM; ++j) {
            want[id*DIM + j] -= 0.5f;
        }
    }
    ok &= get_f32(table) == want;

    ggml_opt_result_free(result);
    ggml_opt_free(opt_ctx);
    ggml_backend_sched_free(sched);
    ggml_free(ctx_compute);
    ggml_backend_buffer_free(buf);
    ggml_free(ctx_static);
    return report("opt_eval", "sgd, sum", cpu, ok);
}

int main(void) {
    ggml_backend_load_all();
    int n_ok = 0, n_total = 0;
    for (int n_threads : { 1, 2, 3 }) {
        for (bool pool : { false, true }) {
            cpu_backend cpu = cpu_init(n_threads, pool);
            const bool results[] = {
                test_get_rows(cpu, GGML_TYPE_F32),
                test_get_rows(cpu, GGML_TYPE_F16),
                test_get_rows(cpu, GGML_TYPE_BF16),
                test_get_rows(cpu, GGML_TYPE_Q8_0),
                test_get_rows(cpu, GGML_TYPE_I32),
                test_get_rows_after_node(cpu),
                test_get_rows_back(cpu),
                test_set_rows(cpu, GGML_TYPE_I64),
                test_set_rows(cpu, GGML_TYPE_I32),
                test_add_id(cpu),
                test_mul_mat_id(cpu),
                test_opt_eval(cpu),
            };
            for (bool r : results) {
                n_ok += r;
                n_total += 1;
            }
            cpu_free(cpu);
        }
    }
    printf("%d/%d tests passed\n", n_ok, n_total);
    return n_ok == n_total ? 0 : 1;
}
