// Python functions that C calls back into (cffi "extern Python"), one per C callback type the
// Python layer installs. Each receives its Python target through the `void *` user-data argument
// (a cffi handle), so one C entry point serves any number of Python objects.

// ggml_log_callback: routes ggml's log lines to the `logging` module.
extern "Python" void pyggml_log_callback(enum ggml_log_level level, const char * text, void * user_data);

// ggml_abort_callback_t: last line of defence before abort(); prints the Python stack.
extern "Python" void pyggml_abort_callback(const char * error_message);

// ggml_opt_get_optimizer_params: called by ggml-opt once per optimizer step; returns the struct by value.
extern "Python" struct ggml_opt_optimizer_params pyggml_get_optimizer_params(void * userdata);

// ggml_opt_epoch_callback: called by ggml_opt_epoch / ggml_opt_fit after each batch.
extern "Python" void pyggml_epoch_callback(bool train, ggml_opt_context_t opt_ctx, ggml_opt_dataset_t dataset,
                                           ggml_opt_result_t result, int64_t ibatch, int64_t ibatch_max,
                                           int64_t t_start_us);

// ggml_backend_sched_eval_callback is not used; ggml_abort_callback (ggml-backend.h) lets a long
// graph computation be interrupted between nodes.
extern "Python" bool pyggml_compute_abort_callback(void * data);
